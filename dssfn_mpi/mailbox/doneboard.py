"""The async engine's "all done" signal under ``--stop eps`` and ``--stop local``.

A board in one rank's RMA window (rank 0's; the other ranks' windows are
empty): for every layer, one int64 *flag* word per rank (1: that rank's own
test passes, :class:`~dssfn_mpi.algorithms.stoprule.NodeCheck`) and one *ended*
word. A rank writes only its own flag, with a put when the flag changes, and
after every activation reads the layer's M flags and ended word with one get::

    ended == 1             -> the layer is over
    every flag == 1        -> the layer is over: put ended = 1 (any rank may; same value)
    else                   -> go on

No lock, accumulate, barrier or collective: a read is one small get from rank
0's memory (a ``memcpy`` through shared memory on one node, one RDMA read
across hosts), and nobody ever waits for another rank to answer. The words are
aligned 8-byte values with one writer each (``ended`` only ever goes from 0 to
1), read and written in one piece: the assumption the seqlock of
:mod:`dssfn_mpi.mailbox.transport` already makes. The M flags are not read at one
instant: "every rank done" means every flag read as 1 within one get, while
each was set by its rank's own test on its latest iterate. The ended word
makes the decision final, so a rank whose test fails again afterwards still
leaves the layer with the others (no rank is left activating against
neighbours that stopped).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

__all__ = ["DoneBoard"]

_WORD = 8
_HOST = 0  # the rank whose window holds the board


class DoneBoard:
    """Per-layer done flags of every rank and an ended word, in rank 0's window.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The run's ranks. Creation and :meth:`free` are collective.
    layers : int
        Layers of the run (``L + 1``): one row of words each, so that a rank
        still finishing layer ``l`` never sees layer ``l + 1``'s flags.
    """

    def __init__(self, comm: MPI.Intracomm, layers: int) -> None:
        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()
        self._row = self.size + 1  # M flags, then the ended word
        words = self._row * int(layers) if self.rank == _HOST else 0
        self._win: MPI.Win | None = MPI.Win.Allocate(words * _WORD, _WORD, comm=comm)
        if self.rank == _HOST:
            self._win.Lock(self.rank, MPI.LOCK_EXCLUSIVE)
            np.frombuffer(self._win.tomemory(), dtype=np.int64, count=words)[:] = 0
            self._win.Unlock(self.rank)
        comm.Barrier()  # nobody puts before the board is zeroed
        self._win.Lock_all(MPI.MODE_NOCHECK)
        self._row_buf = np.zeros(self._row, dtype=np.int64)
        self._word = np.zeros(1, dtype=np.int64)
        self._mine: dict[int, bool] = {}  # layer -> the flag this rank last wrote
        #: Gets issued (one per :meth:`ended` call): the signal's cost, for the log.
        self.reads = 0

    def _put(self, value: int, disp: int) -> None:
        assert self._win is not None
        self._word[0] = value
        self._win.Put(self._word, _HOST, disp)
        self._win.Flush(_HOST)

    def vote(self, layer: int, done: bool) -> None:
        """Set this rank's flag of ``layer`` (one put, only when it changes)."""
        if self._mine.get(layer, False) == done:
            return
        self._mine[layer] = done
        self._put(int(done), layer * self._row + self.rank)

    def ended(self, layer: int) -> bool:
        """Whether ``layer`` is over: already decided, or every flag reads as done now."""
        assert self._win is not None
        self.reads += 1
        self._win.Get(self._row_buf, _HOST, layer * self._row)
        self._win.Flush(_HOST)
        if self._row_buf[-1]:
            return True
        if self._row_buf[: self.size].all():
            self._put(1, layer * self._row + self.size)
            return True
        return False

    def free(self) -> None:
        """Release the window (collective). Idempotent."""
        if self._win is None:
            return
        win, self._win = self._win, None
        win.Unlock_all()
        win.Free()
