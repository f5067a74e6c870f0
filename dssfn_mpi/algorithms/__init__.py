"""The algorithms: one object each, run by the live drivers and the simulator alike.

:mod:`.base` defines :class:`Algorithm`; :mod:`.registry` maps ``--mode`` to them.
"""

from __future__ import annotations

from .base import Algorithm, local_inverse, needs_gram, penalty_matrix
from .registry import ALGORITHMS, known, lookup, names, register

__all__ = ["ALGORITHMS", "Algorithm", "known", "local_inverse", "lookup", "names", "needs_gram",
           "penalty_matrix", "register"]
