"""The driver kinds: the ways of running an algorithm (live, simulated, replayed).

An :class:`~dssfn_mpi.algorithms.Algorithm` names its driver (:attr:`Algorithm.driver`,
one of :data:`DRIVERS`); the driver owns how a layer of it runs: its live engine over MPI,
its simulated solve, its replayed timeline and whether its layers take a penalty.
docs/EXTENDING.md, "Adding a driver kind", walks through adding one.
"""

from __future__ import annotations

from .base import Driver, Penalty
from .registry import CENTRAL, CONSENSUS, DRIVERS, LOCKSTEP, ONE_SHOT, ONE_SIDED, register_driver

__all__ = ["CENTRAL", "CONSENSUS", "DRIVERS", "Driver", "LOCKSTEP", "ONE_SHOT", "ONE_SIDED",
           "Penalty", "register_driver"]
