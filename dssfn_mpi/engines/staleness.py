"""ARock's delay, measured: neighbour versions skipped between a node's reads.

One rule (:class:`Staleness`) for the live one-sided driver (:mod:`dssfn_mpi.engines.async_arock`,
one read at a time) and the simulator (:mod:`dssfn_mpi.sim.asyncsim`, all of a layer's reads at
once); the run log's ``staleness_mean`` and ``staleness_max``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Staleness", "staleness"]


def _skipped(versions: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The neighbour versions each read skipped.

    A read of version v of a neighbour whose newest version read before was u < v skipped
    ``v - u - 1`` versions; a read of nothing newer skipped none.

    Parameters
    ----------
    versions : ndarray, shape (reads, D)
        The versions of each neighbour that each read returned, in the order of the reads.
    last : ndarray, shape (D,)
        The newest version of each neighbour read before them (0: none).

    Returns
    -------
    ndarray, shape (reads, D)
    """
    versions = np.asarray(versions, dtype=np.int64)
    before = np.concatenate([np.asarray(last, dtype=np.int64)[None], versions[:-1]])
    newest = np.maximum.accumulate(before, axis=0)
    return np.where(versions > newest, versions - newest - 1, 0)


class Staleness:
    """Neighbour versions skipped between this node's reads."""

    def __init__(self, degree: int) -> None:
        self.last = np.zeros(degree, dtype=np.int64)
        self.skipped, self.max, self.reads = 0, 0, 0

    def record(self, versions: np.ndarray) -> None:
        """Account for one or more reads of every neighbour that returned ``versions``
        (shape (D,), or (reads, D) in the order of the reads)."""
        versions = np.atleast_2d(np.asarray(versions, dtype=np.int64))
        if not versions.shape[0]:
            return
        s = _skipped(versions, self.last)
        self.skipped += int(s.sum())
        self.max = max(self.max, int(s.max()))
        np.maximum(self.last, versions.max(axis=0), out=self.last)
        self.reads += versions.size

    @property
    def mean(self) -> float:
        """Mean versions skipped per neighbour read."""
        return self.skipped / max(self.reads, 1)


def staleness(versions: np.ndarray, degree: int) -> tuple[float, float]:
    """Mean and largest number of neighbour versions skipped per read, over ``versions``
    (shape (reads, D): the neighbour versions of each read)."""
    s = Staleness(degree)
    s.record(versions)
    return s.mean, float(s.max)
