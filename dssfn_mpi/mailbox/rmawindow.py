"""The mailbox's MPI window for its whole life: allocate, map the peers, one epoch, free.

The window is MPI-allocated (only those are truly passive, docs/MPI.md): a
shared one when every rank is on one node, so that a rank can also store into
its neighbours' memory directly, else ``Win.Allocate``. Every rank holds one
passive epoch (``Lock_all(MODE_NOCHECK)``) from creation to :meth:`free`; no
MPI lock is taken in between. Creation and :meth:`MailboxWindow.free` are
collective; on an error only the local part is undone (:meth:`abandon`), and
the job's abort reclaims the rest.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .slotlayout import WORD_BYTES, SlotLayout

__all__ = ["MailboxWindow", "allocate"]


def allocate(comm: MPI.Intracomm, nbytes: int, shared: bool = True) -> MPI.Win:
    """The mailbox's window: shared memory when every rank is on one node, else allocated.

    Both flavours are MPI-allocated (passive puts, unified model with osc/sm).
    A shared window also lets a rank store into its neighbours' windows
    directly (:attr:`MailboxWindow.shared`). Where the one-sided component
    cannot make one (Open MPI's osc/rdma), ``Win.Allocate_shared`` fails on
    every rank alike, and the allocated flavour is used; so it is when not
    ``shared`` (writes by ``MPI_Put`` wanted).
    """
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    one_node = node.Get_size() == comm.Get_size()
    node.Free()
    if shared and one_node and comm.Get_size() > 1:
        try:  # contiguous (the default): one address range holds every rank's window
            return MPI.Win.Allocate_shared(nbytes, WORD_BYTES, comm=comm)
        except MPI.Exception:
            pass
    return MPI.Win.Allocate(nbytes, WORD_BYTES, comm=comm)


class MailboxWindow:
    """One rank's mailbox window, initialised, in its epoch, with the peers' memory mapped.

    Creation is collective over ``comm``: the window is allocated, this rank's
    words are set to the empty state (:meth:`SlotLayout.initialise`), everyone
    waits until every rank has done so (nobody may write before), and the
    epoch opens.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The mailbox's communicator.
    layout : SlotLayout
        This rank's layout: the window's size and the neighbours to map.
    shared : bool, optional
        False: an allocated window even where a shared one could be made.

    Attributes
    ----------
    words, values : numpy.ndarray or None
        This rank's window as int64 and as float64 (None once the views are dropped).
    counters : memoryview or None
        The same words as a memoryview: indexing it gives Python ints, ~20x
        cheaper than numpy scalars (the reads check counters per neighbour).
    node_words, node_values : numpy.ndarray or None
        With a shared window, one array over the address range that holds this
        rank's and its neighbours' windows (contiguous), as int64 and float64;
        None otherwise.
    node_start : dict of int to int
        With a shared window, the word of ``node_words`` where neighbour ``n``'s
        window starts.
    """

    def __init__(self, comm: MPI.Intracomm, layout: SlotLayout, shared: bool = True) -> None:
        me = comm.Get_rank()
        size = layout.window_words
        self._win: MPI.Win | None = allocate(comm, size * WORD_BYTES, shared)
        mem = self._win.tomemory()
        # The only views of window memory; drop_views() releases them before Win.Free().
        self.values: np.ndarray | None = np.frombuffer(mem, dtype=np.float64, count=size)
        self.words: np.ndarray | None = np.frombuffer(mem, dtype=np.int64, count=size)
        self.counters: memoryview | None = memoryview(self.words)
        del mem
        # Initialise under a (one-off, uncontended) self-lock: its Unlock makes the
        # local stores public before anyone may put.
        self._win.Lock(me, MPI.LOCK_EXCLUSIVE)
        layout.initialise(self.words)
        self._win.Unlock(me)
        # Nobody may put before every target has initialised its headers.
        comm.Barrier()
        # One passive epoch for the life of the window; NOCHECK: nobody ever
        # takes a conflicting lock, so no lock is taken at all.
        self._win.Lock_all(MPI.MODE_NOCHECK)
        self._epoch_open = True
        self.node_values: np.ndarray | None = None
        self.node_words: np.ndarray | None = None
        self.node_start: dict[int, int] = {}
        if self._win.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_SHARED and layout.degree:
            self._map_peers(me, layout.neighbors)

    def _map_peers(self, me: int, peers: tuple[int, ...]) -> None:
        """One array over my window and my peers' (a shared window is contiguous)."""
        assert self._win is not None
        where = {r: self._win.Shared_query(r)[0] for r in (me, *peers)}
        base = min(b.address for b in where.values())
        end = max(b.address + len(b) for b in where.values())
        span = MPI.buffer.fromaddress(base, end - base)
        self.node_values = np.frombuffer(span, dtype=np.float64)
        self.node_words = np.frombuffer(span, dtype=np.int64)
        self.node_start = {n: (where[n].address - base) // WORD_BYTES for n in peers}

    def check_open(self) -> MPI.Win:
        """The open window; RuntimeError after :meth:`free` or :meth:`abandon`."""
        if self._win is None:
            raise RuntimeError("ZMailbox used after free()")
        if self.words is None:
            raise RuntimeError("ZMailbox used after its with-block failed")
        return self._win

    @property
    def shared(self) -> bool:
        """True when the neighbours' windows are mapped (plain stores reach them)."""
        return self.node_values is not None

    @property
    def closed(self) -> bool:
        """True after :meth:`free`."""
        return self._win is None

    def _close_epoch(self) -> None:
        # Unlock_all is local (not collective), so the error path may call it too.
        if self._win is not None and self._epoch_open:
            self._epoch_open = False
            self._win.Unlock_all()

    def _drop_views(self) -> None:
        # A numpy view alive at Win.Free() ended in "double free or corruption".
        if self.counters is not None:
            self.counters.release()
        self.node_values = self.node_words = None
        self.counters = None
        self.values = None
        self.words = None

    def free(self) -> None:
        """Release the window (collective: every rank must call it). Idempotent."""
        if self._win is None:
            return
        self._close_epoch()
        self._drop_views()
        win, self._win = self._win, None
        win.Free()

    def abandon(self) -> None:
        """The error path: close my epoch and drop the views, but leave ``Win.Free``.

        ``Win.Free`` is collective: if only this rank failed, calling it would
        hang here and the error would never reach the handler that aborts the
        job. The abort (or finalize) reclaims MPI; :meth:`free` still works after.
        """
        try:
            self._close_epoch()
        except MPI.Exception:
            pass
        self._drop_views()
