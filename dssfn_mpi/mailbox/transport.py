"""One-sided RMA mailboxes for the dual variables Z of the asynchronous engine.

Node ``m`` writes its ``Z_{m,n}`` straight into neighbour ``n``'s memory with
``MPI_Put`` while ``n`` keeps computing: no message, no handshake, no matching
receive. ``n`` reads the latest value whenever it activates. This is the
communication pattern of ARock-style asynchronous ADMM.

Two facts shape this module (measured, with the commands, in docs/MPI.md):

* Only MPI-*allocated* windows (``Win.Allocate``, or ``Win.Allocate_shared`` on
  one node, where a rank then stores into its neighbours' memory directly) are
  truly passive: a put into a ``Win.Create`` window over user memory completes
  only when the target next enters MPI, which defeats the point.
  :func:`dssfn_mpi.mailbox.rmacheck.passive_put_check` tests this.
* Windows use the unified memory model, so a reader can see a half-written Z
  while a put is in flight. Reads are therefore validated by a *seqlock*: every
  slot has one writer, which brackets each write with two counters, and the
  reader keeps a copy only if both counters agree around it. A torn copy is
  discarded, never returned.

No MPI lock is taken after start-up: each rank opens one passive epoch
(``Lock_all`` with ``MODE_NOCHECK``) for the life of the window. Open MPI's
osc/sm window locks are ticket spin locks; with 20 ranks on 2 cores a
descheduled holder made every waiter spin away its time slice (~2 ms of CPU per
activation against ~0.3 ms of arithmetic). Nothing here waits for another rank
except :meth:`ZMailbox.wait_neighbors_done`, which polls under the run's wait
policy (:mod:`dssfn_mpi.mailbox.waiting`).
"""

from __future__ import annotations

from types import ModuleType, TracebackType

import numpy as np
from mpi4py import MPI

from ..errors import require
from .rmawindow import MailboxWindow
from .slotlayout import GraphLike, SlotLayout
from .slotreader import SlotReader
from .slotwriter import SlotWriter
from .waiting import WaitPolicy, sleep_until

__all__ = ["NeighborTimeout", "ZMailbox"]


class NeighborTimeout(RuntimeError):
    """Some neighbours did not announce the end of a layer in time.

    Attributes
    ----------
    layer : int
        The layer that was waited for.
    silent : tuple of int
        Ranks of the neighbours that had not announced it.
    waited : float
        Seconds spent waiting.
    """

    def __init__(self, layer: int, silent: tuple[int, ...], waited: float) -> None:
        self.layer = layer
        self.silent = silent
        self.waited = waited
        super().__init__(
            f"neighbour rank(s) {', '.join(map(str, silent))} did not finish layer {layer} "
            f"within {waited:.3g} s"
        )


class ZMailbox:
    """Per-rank RMA window holding the latest ``Z_{n,me}`` of every neighbour ``n``.

    What the engine uses: :meth:`outbox`, :meth:`put_all`, :meth:`read_rows`,
    :meth:`finish_layer`, :meth:`wait_neighbors_done`, the counters and
    :meth:`free`. The parts: :attr:`layout` (where every word sits,
    :mod:`dssfn_mpi.mailbox.slotlayout`: for every in-neighbour two *parity* slots
    (``layer % 2``), each an int64 header ``[begin, end, layer, version,
    nelems, rows, cols]`` followed by the float64 data, then one "finished
    layer" word per in-neighbour; every slot and every finished word has
    exactly one writer, the neighbour it belongs to), :attr:`window` (its life,
    :mod:`dssfn_mpi.mailbox.rmawindow`), :attr:`writer` and :attr:`reader` (the two
    sides of the seqlock below, :mod:`dssfn_mpi.mailbox.slotwriter` and
    :mod:`dssfn_mpi.mailbox.slotreader`). The benchmark's and the tests' entry points
    for one neighbour are in :class:`dssfn_mpi.bench.micro.mailbox.BenchMailbox`.

    Synchronisation
        Every rank holds one passive epoch on the window from creation to
        :meth:`free` (``Lock_all(MODE_NOCHECK)``); no MPI lock is taken in
        between. A write of a slot is a seqlock write. The writer counts its
        writes to the slot (``s = 1, 2, ...``) and does::

            Put(begin = s); Flush      # 1: announce write s
            Put(header); Put(Z); Flush # 2: the payload
            Put(end = s); Flush        # 3: write s is complete

        The owner reads without waiting for anyone::

            e = end; Sync; [b0 = begin; give up at once if b0 != e]
            copy header and data; Sync; b = begin

        and accepts the copy iff ``b == e`` (``e == 0``: never written). It
        then checks the copy's ``layer`` (another layer in the slot reads as
        "nothing yet") and ``version``.

    Why an accepted copy is exactly write ``e``
        ``Flush`` returns when the put is complete at the target, so in the
        unified model its data are in the target's memory before the writer
        issues the next put: the writer's stores reach memory in the order
        ``begin_s < payload_s < end_s < begin_{s+1} < payload_{s+1} < ...``.
        ``Sync`` is a memory barrier for the reader (Open MPI osc/sm implements
        both as ``opal_atomic_mb``), so its loads happen in the order ``end``,
        payload, ``begin``. Take any payload byte the reader copied.
        (a) The reader saw ``end == e``, so ``payload_e`` had reached memory
        before that load; the byte therefore comes from ``payload_e`` or a later
        write, never an earlier one. (b) If it came from ``payload_j`` with
        ``j > e``, then ``begin = j`` reached memory before it, so the later
        load of ``begin`` returns at least ``j > e`` and the copy is rejected.
        Hence in an accepted copy every byte of header and data comes from write
        ``e``. Nothing needs the data words themselves to be atomic; the one
        assumption is that an aligned 8-byte counter is written and read in one
        piece (osc/sm puts are ``memcpy`` into shared memory; true on x86-64 and
        AArch64). MPI guarantees element-wise atomicity only between accumulate
        operations, and a local load is not one; osc/sm's ``Accumulate``
        is moreover a ``memcpy`` under a per-target spin lock, so it would buy
        no guarantee here and bring a lock back.

    Never waiting for a writer
        A copy that fails the check is retried at once, ``ATTEMPTS - 1`` times
        at most (a writer descheduled between ``begin`` and ``end`` would fail
        every retry). Then the read returns the last consistent copy this rank
        made of that neighbour's slot for the same layer — stale, which ARock
        allows and the engine's version counts measure — or "nothing yet" if
        there is none. One private copy is kept per neighbour (for the parity
        last read; the engine reads one layer at a time). A read whose ``end``
        still equals the kept copy's counter returns the kept copy without
        touching the window. :attr:`torn_retries` counts the rejected copies,
        :attr:`fallbacks` the reads answered by a fallback.

    Direct stores
        When every rank is on one node the window is a contiguous shared one
        (``Win.Allocate_shared``; :attr:`direct`), and a write is the same
        three phases as plain stores into the neighbours' memory, each phase
        ended by ``Sync`` (a full memory barrier) where a put phase ends with a
        flush: the stores still reach memory in the order ``begin``, payload,
        ``end``, which is all the argument above uses. Reads are unchanged.
        With numba, both the read and the write of all neighbours are then one
        compiled call each (:mod:`dssfn_mpi.mailbox.seqlock`: the same steps, with
        memory fences where this code calls ``Sync``; ``compiled=False`` keeps
        them in Python, the reference).

    Finished words
        :meth:`finish_layer` puts one aligned int64 per neighbour and flushes;
        the value only grows and has one writer, so the reader (after ``Sync``)
        sees the old or the new value, both valid lower bounds (same 8-byte
        assumption as the counters).

    Contract with the engine
        A slot is reused every second layer. Before its first :meth:`put_all` of
        layer ``l`` a rank must call ``wait_neighbors_done(l - 2)``, so that no
        neighbour still wants layer ``l - 2`` from the slot that layer ``l``
        overwrites. A neighbour one layer ahead is harmless: it writes the other
        parity, and the final layer-``l - 1`` values stay readable. (The seqlock
        keeps even a contract breach from producing a torn Z; the read would
        only report "nothing yet" for the old layer.)

    Collectives
        ``__init__`` and :meth:`free` are collective over ``comm`` (window
        creation and destruction); every other method is purely one-sided. All
        ranks must call :meth:`free` at the end, or MPI may hang at finalisation.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        Communicator whose ranks are the graph's nodes (rank ``m`` is node ``m``).
    graph : Graph
        Undirected communication graph: ``neighbors(m)`` returns a sorted tuple
        and ``n`` is in ``neighbors(m)`` iff ``m`` is in ``neighbors(n)``.
    max_elems : int
        Largest ``Z.size`` that will ever be put; must be equal on all ranks.
    compiled : bool, optional
        With direct stores, run the seqlock's reads and writes as compiled loops
        (:mod:`dssfn_mpi.mailbox.seqlock`; True: raise without numba), in Python (False),
        or compiled when numba is installed (None). With puts always Python.
    force_put : bool, optional
        Write with ``MPI_Put`` even where direct stores are possible (an
        allocated, not a shared, window; the same on every rank).

    Attributes
    ----------
    layout : SlotLayout
        Where every word of this rank's mailbox sits.
    window : MailboxWindow
        The window, its epoch and the neighbours' mapped memory.
    writer : SlotWriter
        This rank's writes (counters, versions, outbox).
    reader : SlotReader
        This rank's reads (kept copies, retries, fallbacks).
    puts, bytes_sent, torn_retries, fallbacks : int
        The counters (properties below).
    """

    def __init__(self, comm: MPI.Intracomm, graph: GraphLike, max_elems: int,
                 compiled: bool | None = None, force_put: bool = False) -> None:
        require(
            graph.n_nodes == comm.Get_size(),
            f"the graph has {graph.n_nodes} nodes but MPI started {comm.Get_size()} ranks; "
            f"run with mpirun -n {graph.n_nodes}",
        )
        max_elems = int(max_elems)
        if max_elems < 1:
            raise ValueError(f"max_elems must be positive, got {max_elems}")
        # Senders compute offsets in the target's window from their own max_elems,
        # so a disagreement would corrupt memory. Check before allocating; every
        # rank sees the same answer, so all raise together and none hangs.
        lo = comm.allreduce(max_elems, op=MPI.MIN)
        hi = comm.allreduce(max_elems, op=MPI.MAX)
        if lo != hi:
            raise ValueError(f"max_elems differs between ranks ({lo} .. {hi})")

        self.comm = comm
        self.rank = comm.Get_rank()
        self.max_elems = max_elems
        self.layout = SlotLayout.of(graph, self.rank, max_elems)
        self.neighbors: tuple[int, ...] = self.layout.neighbors
        self.window = MailboxWindow(comm, self.layout, shared=not force_put)
        seqlock = _compiled_seqlock(compiled, self.window.shared)
        self.writer = SlotWriter(self.layout, self.window, seqlock)
        self.reader = SlotReader(self.layout, self.window, seqlock)
        self._announced = -1  # last layer I announced with finish_layer
        self._finished_word = np.zeros(1, dtype=np.int64)  # what finish_layer puts

    # -- data -------------------------------------------------------------------

    def outbox(self) -> tuple[np.ndarray, int]:
        """The mailbox's send buffer for :meth:`put_all`, and where the data start.

        Returns ``(store, offset)``: ``store`` is C-contiguous, shape ``(degree,
        offset + max_elems)``; neighbour ``i``'s ``Z`` of ``rows x cols`` values
        is ``store[i, offset : offset + rows * cols]``, right after room for its
        slot header. Handing :meth:`put_all` a ``(degree, rows, cols)`` view of
        these sends each neighbour's header and ``Z`` in one put (any other array
        takes two). The same memory on every call; zeros at first.
        """
        return self.writer.outbox()

    def put_all(self, Z: np.ndarray, layer: int) -> None:
        """Write my ``Z_{me,n}`` for ``layer`` into every neighbour ``n = neighbors[i]``'s
        window, ``Z[i]`` to ``n``.

        Returns when the data is in the neighbours' memory; ``Z`` may be
        modified at once. The version a neighbour sees counts my writes to it
        for this layer (1, 2, ...). Never waits for a neighbour: each write is
        bracketed by the slot's seqlock counters (see the class notes) instead
        of a lock, phase by phase over all neighbours (one ``Flush_all`` per
        phase with puts, one memory barrier with direct stores): every slot
        sees ``begin``, then its payload, then ``end``. A slot's write is in
        flight for the whole call; a reader then retries or falls back.

        Parameters
        ----------
        Z : numpy.ndarray, shape (degree, rows, cols)
            ``Z[i]`` goes to ``neighbors[i]``: float64, each ``Z[i]`` C-contiguous
            (no copy is made), at most ``max_elems`` values each. The
            :meth:`outbox` needs one put per neighbour and phase, any other array two.
        layer : int
            Non-negative layer index; selects the parity slot ``layer % 2``.
        """
        if Z.ndim != 3 or Z.shape[0] != len(self.neighbors):
            raise ValueError(f"Z must be (degree={len(self.neighbors)}, rows, cols), "
                             f"got shape {Z.shape}")
        if Z.dtype != np.float64 or Z.strides[1:] != (8 * Z.shape[2], 8):
            raise ValueError("Z must be float64 with C-contiguous Z[i]")
        self.writer.write(self.neighbors, Z, layer)

    def read_rows(self, layer: int, size: int,
                  versions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every neighbour's latest Z for ``layer`` as rows of one table; never waits.

        If a neighbour is writing its slot during every attempt, its row is the
        last consistent copy this rank read from it (see the class notes). No
        copy beyond the seqlock's own (one per slot written since the last
        read; none for an unchanged slot).

        Parameters
        ----------
        layer : int
            Layer index.
        size : int
            ``rows x cols`` every neighbour's Z must have.
        versions : numpy.ndarray of int64, shape (degree,)
            Receives each neighbour's put counter (0 when nothing was written). A
            value may be stale (a fallback) but never older than the previous
            call's for the same layer.

        Returns
        -------
        table : numpy.ndarray, shape (2 degree + 1, max_elems)
            The mailbox's copies (do not write to it); valid until the next read.
        rows : numpy.ndarray of intp, shape (degree,)
            ``table[rows[i], :size]`` is ``Z_{n,me}`` of ``n = neighbors[i]``, flat
            (a row of zeros for a neighbour that has not written for ``layer``).
        """
        return self.reader.read_rows(layer, size, versions)

    # -- layer handshake --------------------------------------------------------

    def finish_layer(self, layer: int) -> None:
        """Announce to every neighbour that I am done with ``layer``.

        One 8-byte put per neighbour, then one flush. Announcements are
        monotone: announcing ``layer`` also covers every earlier layer, and
        announcing an earlier layer than before raises ValueError.
        """
        win = self.window.check_open()
        if layer < self._announced:
            raise ValueError(f"finish_layer({layer}) after finish_layer({self._announced})")
        self._announced = layer
        self._finished_word[0] = layer
        for i, n in enumerate(self.neighbors):
            win.Put(self._finished_word, n, self.layout.out_finished_word(i))
        win.Flush_all()

    def finished_layers(self) -> dict[int, int]:
        """Last layer each neighbour announced (-1 for none)."""
        win = self.window.check_open()
        words = self.window.words
        assert words is not None
        start = self.layout.finished_start
        win.Sync()  # make completed remote puts visible to my loads
        fin = words[start : start + len(self.neighbors)].copy()
        return {n: int(f) for n, f in zip(self.neighbors, fin)}

    def wait_neighbors_done(self, layer: int, timeout: float,
                            policy: WaitPolicy | None = None) -> float:
        """Block until every neighbour has announced ``finish_layer(layer)``.

        Polls under ``policy`` (default: sleeping between polls,
        :func:`dssfn_mpi.mailbox.waiting.sleep_until`). No MPI progress is needed: puts
        into allocated windows complete without the target's help.

        Parameters
        ----------
        layer : int
            Layer to wait for; a neighbour that announced a later one counts.
        timeout : float
            Seconds before giving up.
        policy : WaitPolicy, optional
            The run's wait policy (a passive wait).

        Returns
        -------
        float
            Seconds waited.

        Raises
        ------
        NeighborTimeout
            Naming the neighbours that stayed silent.
        """
        def silent() -> tuple[int, ...]:
            return tuple(n for n, f in self.finished_layers().items() if f < layer)

        if policy is None:
            done, waited = sleep_until(lambda: not silent(), timeout)
        else:
            done, waited = policy.wait(lambda: not silent(), timeout)
        if not done:
            raise NeighborTimeout(layer, silent(), waited)
        return waited

    # -- bookkeeping ------------------------------------------------------------

    @property
    def puts(self) -> int:
        """Writes of one neighbour's slot (Z puts) since creation."""
        return self.writer.puts

    @property
    def bytes_sent(self) -> int:
        """Bytes moved by those writes, header and counters included."""
        return self.writer.bytes_sent

    @property
    def torn_retries(self) -> int:
        """Copies of a slot rejected because a write was in flight."""
        return self.reader.torn_retries

    @property
    def fallbacks(self) -> int:
        """Reads of one neighbour's slot that gave up after ``ATTEMPTS`` rejected copies
        and returned the last consistent copy (or "nothing yet")."""
        return self.reader.fallbacks

    @property
    def compiled(self) -> bool:
        """True when the seqlock's reads and writes run compiled (:mod:`.seqlock`)."""
        return self.reader._compiled is not None

    @property
    def direct(self) -> bool:
        """True when Z is written with plain stores into the neighbours' shared memory,
        False when with ``MPI_Put`` (more than one node, or no shared window)."""
        return self.window.shared

    @property
    def closed(self) -> bool:
        """True after :meth:`free`."""
        return self.window.closed

    def free(self) -> None:
        """Release the window (collective: every rank must call it). Idempotent."""
        self.window.free()

    def __enter__(self) -> ZMailbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.free()
        else:
            # Win.Free is collective: if only this rank failed, calling it would hang here
            # and the error would never reach the handler that aborts the job.
            self.window.abandon()


def _compiled_seqlock(compiled: bool | None, direct: bool) -> ModuleType | None:
    """:mod:`dssfn_mpi.mailbox.seqlock` when the reads and writes run compiled, else None.

    Only with direct stores: its fences stand for ``Win_sync`` on plain shared
    memory. ``compiled``: True raises without numba, False never, None when
    numba is installed.
    """
    from . import seqlock  # numba's import waits until a mailbox is built

    if compiled and not seqlock.AVAILABLE:
        raise RuntimeError("the compiled seqlock needs numba (pip install numba)")
    use = seqlock.AVAILABLE if compiled is None else bool(compiled)
    return seqlock if use and direct else None
