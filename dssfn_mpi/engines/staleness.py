"""ARock's delay, measured: neighbour versions skipped between a node's reads.

One rule for the live one-sided driver (:mod:`dssfn_mpi.engines.async_arock`) and the
simulator (:mod:`dssfn_mpi.sim.asyncsim`); the run log's ``staleness_mean`` and
``staleness_max``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["Staleness", "staleness"]


class Staleness:
    """Neighbour versions skipped between this node's reads."""

    def __init__(self, degree: int) -> None:
        self.last = np.zeros(degree, dtype=np.int64)
        self.skipped, self.max, self.reads = 0, 0, 0

    def record(self, versions: np.ndarray) -> None:
        """Account for one read of every neighbour that returned ``versions``."""
        new = versions > self.last
        if new.any():
            skipped = versions[new] - self.last[new] - 1
            self.skipped += int(skipped.sum())
            self.max = max(self.max, int(skipped.max()))
            self.last[new] = versions[new]
        self.reads += self.last.size

    @property
    def mean(self) -> float:
        """Mean versions skipped per neighbour read."""
        return self.skipped / max(self.reads, 1)


def staleness(versions: Iterable[np.ndarray], degree: int) -> tuple[float, float]:
    """Mean and largest number of neighbour versions skipped per read, over ``versions``
    (one array of neighbour versions per read)."""
    s = Staleness(degree)
    for v in versions:
        s.record(v)
    return s.mean, float(s.max)
