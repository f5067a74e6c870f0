"""The methods that solve a layer in one step: one-shot statistics averaging, and central.

``oneshot`` averages the packed ``(G_m, B_m)`` with one allreduce, ``oneshot-graph`` by
neighbour mixing (``--mix-tol``), and every node solves the averaged problem exactly;
``central`` solves the layer on all the data in one process (the reference).
"""

from __future__ import annotations

from typing import Any

from ..drivers import CENTRAL, ONE_SHOT
from ..ssfn.gramstats import stats_bytes, stats_rounds
from .base import Algorithm

__all__ = ["Central", "OneShot"]


class OneShot(Algorithm):
    """Statistics averaged once, the exact solve on every node."""

    driver = ONE_SHOT

    def __init__(self, name: str, averaging: str, summary: str) -> None:
        self.name, self.averaging, self.summary = name, averaging, summary

    def message_bytes(self, n_classes: int, d: int) -> int:
        """The packed statistics (:func:`~dssfn_mpi.ssfn.gramstats.stats_bytes`)."""
        return stats_bytes(d, n_classes)

    def mix_rounds(self, graph: Any, rounds: int | None, tol: float) -> int:
        """Rounds per layer: ``--mix-rounds``, else from ``--mix-tol``
        (:func:`~dssfn_mpi.ssfn.gramstats.stats_rounds`)."""
        return stats_rounds(graph, tol, rounds) if self.mixes else 0


class Central(Algorithm):
    """The centralized model on all the data, on one process."""

    name = "central"
    driver = CENTRAL
    max_ranks = 1
    summary = "the centralized reference on one process (--central-solver)"
