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
  :func:`dssfn_mpi.rmacheck.passive_put_check` tests this.
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
policy (:mod:`dssfn_mpi.waiting`).
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol

import numpy as np
from mpi4py import MPI

from .errors import require
from .waiting import WaitPolicy, sleep_until

__all__ = ["HEADER_WORDS", "NeighborTimeout", "ZMailbox"]

# Slot header, int64: the two seqlock counters, then layer, version, number of
# elements, rows, cols. The float64 data follows.
HEADER_WORDS = 7
_S_BEGIN, _S_END, _S_LAYER, _S_VERSION, _S_NELEMS, _S_ROWS, _S_COLS = range(HEADER_WORDS)
_WORD = 8  # every entry is 8 bytes, so disp_unit=8 and everything stays aligned

# Copies of one slot tried per read before falling back to the last consistent
# value: the first try and two retries. Retries are immediate, never a wait.
_ATTEMPTS = 3

def _allocate(comm: MPI.Intracomm, nbytes: int) -> MPI.Win:
    """The mailbox's window: shared memory when every rank is on one node, else allocated.

    Both flavours are MPI-allocated (passive puts, unified model with osc/sm).
    A shared window also lets a rank store into its neighbours' windows
    directly (:meth:`ZMailbox._write`). Where the one-sided component cannot
    make one (Open MPI's osc/rdma), ``Win.Allocate_shared`` fails on every rank
    alike, and the allocated flavour is used.
    """
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    one_node = node.Get_size() == comm.Get_size()
    node.Free()
    if one_node and comm.Get_size() > 1:
        try:  # contiguous (the default): one address range holds every rank's window
            return MPI.Win.Allocate_shared(nbytes, _WORD, comm=comm)
        except MPI.Exception:
            pass
    return MPI.Win.Allocate(nbytes, _WORD, comm=comm)


class GraphLike(Protocol):
    """What :class:`ZMailbox` needs from ``dssfn_mpi.topology.Graph``."""

    n_nodes: int

    def neighbors(self, m: int) -> tuple[int, ...]: ...

    def degree(self, m: int) -> int: ...


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

    Layout of each rank's window (8-byte words, ``disp_unit=8``): for every
    in-neighbour, in the order of ``graph.neighbors(me)``, two *parity* slots
    (``layer % 2``) of ``HEADER_WORDS + max_elems`` words each — an int64 header
    ``[begin, end, layer, version, nelems, rows, cols]`` followed by the float64
    data — and after all slots one int64 "finished layer" word per in-neighbour
    (initially -1). Every slot and every finished word has exactly one writer:
    the neighbour it belongs to.

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
        A copy that fails the check is retried at once, ``_ATTEMPTS - 1`` times
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
        compiled call each (:mod:`dssfn_mpi.seqlock`: the same steps, with
        memory fences where this code calls ``Sync``; ``compiled=False`` keeps
        them in Python, the reference).

    Finished words
        :meth:`finish_layer` puts one aligned int64 per neighbour and flushes;
        the value only grows and has one writer, so the reader (after ``Sync``)
        sees the old or the new value, both valid lower bounds (same 8-byte
        assumption as the counters).

    Contract with the engine
        A slot is reused every second layer. Before its first :meth:`put` of
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
        (:mod:`dssfn_mpi.seqlock`; True: raise without numba), in Python (False),
        or compiled when numba is installed (None). With puts always Python.

    Attributes
    ----------
    puts : int
        Number of Z puts since creation or :meth:`reset_counters`.
    bytes_sent : int
        Bytes moved by those puts, header and counters included.
    torn_retries : int
        Copies of a slot rejected because a write was in flight.
    fallbacks : int
        Reads of one neighbour's slot that gave up after ``_ATTEMPTS`` rejected
        copies and returned the last consistent copy (or "nothing yet").
    """

    #: The reads' second load of ``begin`` (only the mutation control turns it off).
    _second_check = True

    def __init__(self, comm: MPI.Intracomm, graph: GraphLike, max_elems: int,
                 compiled: bool | None = None) -> None:
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
        self.rank = me = comm.Get_rank()
        self.max_elems = max_elems
        self.neighbors: tuple[int, ...] = tuple(graph.neighbors(me))
        for n in self.neighbors:
            if me not in graph.neighbors(n):
                raise ValueError(f"graph is not symmetric: {n} is a neighbour of {me} but not back")
        self._slot_words = HEADER_WORDS + max_elems
        # Where I read neighbour n's data in my window ...
        self._in_slot = {n: k for k, n in enumerate(self.neighbors)}
        # ... and where I write mine in n's window: n's layout depends on n's degree.
        self._out_slot: dict[int, int] = {}
        self._out_finished: dict[int, int] = {}
        for n in self.neighbors:
            nn = tuple(graph.neighbors(n))
            k = nn.index(me)
            self._out_slot[n] = k
            self._out_finished[n] = 2 * len(nn) * self._slot_words + k
        deg = len(self.neighbors)
        self._finished_off = 2 * deg * self._slot_words
        words = max(self._finished_off + deg, 1)

        self._win: MPI.Win | None = _allocate(comm, words * _WORD)
        mem = self._win.tomemory()
        # The only views of window memory; free() drops them before Win.Free().
        self._f64: np.ndarray | None = np.frombuffer(mem, dtype=np.float64, count=words)
        self._i64: np.ndarray | None = np.frombuffer(mem, dtype=np.int64, count=words)
        # The same words as a memoryview: indexing it gives Python ints, ~20x cheaper than
        # numpy scalars (the reads' counter checks are per neighbour).
        self._mv: memoryview | None = memoryview(self._i64)
        del mem
        # Initialise under a (one-off, uncontended) self-lock: its Unlock makes the
        # local stores public before anyone may put.
        self._win.Lock(me, MPI.LOCK_EXCLUSIVE)
        for k in range(deg):
            for parity in (0, 1):
                off = self._slot_offset(k, parity)
                self._i64[off : off + HEADER_WORDS] = (0, 0, -1, 0, 0, 0, 0)
        self._i64[self._finished_off : self._finished_off + deg] = -1
        self._win.Unlock(me)
        # Nobody may put before every target has initialised its headers.
        comm.Barrier()
        # One passive epoch for the life of the window; NOCHECK: nobody ever
        # takes a conflicting lock, so no lock is taken at all.
        self._win.Lock_all(MPI.MODE_NOCHECK)
        self._epoch_open = True

        # Direct stores (class notes) where the window is shared: it is contiguous across
        # ranks, so one array spans me and my neighbours; _peer_at[parity][i] is the word in
        # it where my slot in neighbour i's window starts.
        self._every = np.arange(deg, dtype=np.intp)  # all neighbours' indices
        self._node_f64: np.ndarray | None = None
        self._node_i64: np.ndarray | None = None
        self._peer_at: list[np.ndarray] = []  # per parity, per neighbour index
        if self._win.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_SHARED and deg:
            where = {r: self._win.Shared_query(r)[0] for r in (me, *self.neighbors)}
            base = min(b.address for b in where.values())
            end = max(b.address + len(b) for b in where.values())
            span = MPI.buffer.fromaddress(base, end - base)
            self._node_f64 = np.frombuffer(span, dtype=np.float64)
            self._node_i64 = np.frombuffer(span, dtype=np.int64)
            self._peer_at = [np.array([(where[n].address - base) // _WORD
                                       + self._slot_offset(self._out_slot[n], par)
                                       for n in self.neighbors], dtype=np.intp)
                             for par in (0, 1)]
            del where, span
        # ... and the indices of every slot's words there, per parity (_slot_indices).
        self._peer_idx = [self._slot_indices(par, self._every) for par in (0, 1)] \
            if self._peer_at else []
        # Reusable header (layer .. cols) and counter word, one per neighbour.
        self._header = np.zeros((max(deg, 1), HEADER_WORDS - 2), dtype=np.int64)
        self._ctr = [np.zeros(1, dtype=np.int64) for _ in range(max(deg, 1))]
        self._one = np.zeros(1, dtype=np.int64)  # reusable finished word
        self._versions: dict[int, np.ndarray] = {}  # layer -> my put counter per neighbour
        self._seq = np.zeros((2, max(deg, 1)), dtype=np.int64)  # my write counters per parity
        self._out_head: tuple[int, ...] = ()  # (layer, size, rows, cols) in the outbox headers
        self._announced = -1  # last layer I announced with finish_layer
        # The outbox (see outbox()): per neighbour its header (layer .. cols) and data in
        # one row, so that a write's payload is one put. Allocated on first use.
        self._out: np.ndarray | None = None
        self._out_i64: np.ndarray | None = None  # its header words, as int64 rows
        self._packed_z: np.ndarray | None = None  # the last view of it put_all was given
        self._payload: tuple[int, list[np.ndarray]] = (-1, [])  # _out_rows' cache
        # Word offsets of every in-slot's first word, per parity (Python ints: a read looks at
        # every neighbour's counters in a loop, where numpy's per-call cost would dominate).
        self._slot_at = [[self._slot_offset(k, par) for k in range(deg)] for par in (0, 1)]
        # ... and of my slot in each neighbour's window, per parity (the writes' targets).
        self._out_at = [{n: self._slot_offset(self._out_slot[n], par) for n in self.neighbors}
                        for par in (0, 1)]
        # The last consistent copy of each neighbour's slot (one per neighbour, for the
        # parity last read): its parity, counter and header fields (layer .. cols), and its
        # data in row 2 i + _cur[i] of _table (the other row receives the next copy). The
        # last row of the table stays zero: "nothing yet" (see read_rows).
        self._k_parity = np.full(deg, -1, dtype=np.int64)
        self._k_seq = np.zeros(deg, dtype=np.int64)
        self._k_head = np.zeros((deg, HEADER_WORDS - 2), dtype=np.int64)
        self._k_head[:, 0] = -1
        self._table = np.zeros((2 * deg + 1, max_elems))
        self._cur = np.zeros(deg, dtype=np.int64)
        # The same as memoryviews for the Python read, whose per-neighbour indexing then
        # gives Python ints (as _mv does).
        self._kp, self._ks, self._kc = (memoryview(a) for a in
                                        (self._k_parity, self._k_seq, self._cur))
        self._rows = np.empty(deg, dtype=np.intp)
        # The row of _table that is not neighbour i's kept copy (the next copy goes there),
        # and, for the compiled read, where each in-slot starts, per parity.
        self._spare = np.array([2 * i + 1 for i in range(deg)], dtype=np.intp)
        self._at = [np.array(at, dtype=np.intp) for at in self._slot_at]
        self._all = list(range(deg))
        # The compiled seqlock (direct stores only: its fences stand for Win_sync on plain
        # shared memory), its scratch and its counts (torn_retries, fallbacks).
        from . import seqlock

        if compiled and not seqlock.AVAILABLE:
            raise RuntimeError("the compiled seqlock needs numba (pip install numba)")
        use = seqlock.AVAILABLE if compiled is None else bool(compiled)
        self._seqlock = seqlock if use and self._node_f64 is not None else None
        self._work = np.empty(deg, dtype=np.intp)
        self._fresh = np.empty((deg, HEADER_WORDS), dtype=np.int64)
        self._no_rows = np.empty(0, dtype=np.intp)
        self._counts = np.zeros(2, dtype=np.int64)
        self.puts = 0
        self.bytes_sent = 0

    # -- layout -----------------------------------------------------------------

    def _slot_offset(self, k: int, parity: int) -> int:
        """Word offset of slot ``k`` (sender index), parity ``parity``."""
        return (2 * k + parity) * self._slot_words

    def _check_open(self) -> MPI.Win:
        if self._win is None:
            raise RuntimeError("ZMailbox used after free()")
        if self._i64 is None:
            raise RuntimeError("ZMailbox used after its with-block failed")
        return self._win

    def _check_neighbor(self, n: int) -> None:
        if n not in self._in_slot:
            raise ValueError(f"rank {n} is not a neighbour of rank {self.rank}")

    # -- data -------------------------------------------------------------------

    def put(self, n: int, Z: np.ndarray, layer: int) -> None:
        """Write my ``Z_{me,n}`` for ``layer`` into neighbour ``n``'s window.

        Returns when the data is in ``n``'s memory; ``Z`` may be modified at once.
        The version seen by ``n`` counts my puts to ``n`` for this layer (1, 2, ...).
        Never waits for ``n``: the write is bracketed by the slot's seqlock
        counters (see the class notes) instead of a lock.

        Parameters
        ----------
        n : int
            Neighbour rank.
        Z : numpy.ndarray
            2-D array with at most ``max_elems`` elements (converted to float64).
        layer : int
            Non-negative layer index; selects the parity slot ``layer % 2``.
        """
        self._check_neighbor(n)
        Z = np.ascontiguousarray(Z, dtype=np.float64)  # no copy in the usual case
        if Z.ndim != 2:
            raise ValueError(f"Z must be 2-D, got shape {Z.shape}")
        self._write((n,), Z[None], layer)

    def outbox(self) -> tuple[np.ndarray, int]:
        """The mailbox's send buffer for :meth:`put_all`, and where the data start.

        Returns ``(store, offset)``: ``store`` is C-contiguous, shape ``(degree,
        offset + max_elems)``; neighbour ``i``'s ``Z`` of ``rows x cols`` values
        is ``store[i, offset : offset + rows * cols]``, right after room for its
        slot header. Handing :meth:`put_all` a ``(degree, rows, cols)`` view of
        these sends each neighbour's header and ``Z`` in one put (any other array
        takes two). The same memory on every call; zeros at first.
        """
        h = HEADER_WORDS - 2
        if self._out is None:
            self._out = np.zeros((len(self.neighbors), h + self.max_elems))
            self._out_i64 = self._out[:, :h].view(np.int64)
        return self._out, h

    def _out_rows(self, size: int) -> list[np.ndarray]:
        """Per neighbour, the outbox's header and ``size`` values as one array (cached)."""
        if self._payload[0] != size:
            assert self._out is not None
            h = HEADER_WORDS - 2
            self._payload = (size, [row[: h + size] for row in self._out])
        return self._payload[1]

    def put_all(self, Z: np.ndarray, layer: int) -> None:
        """``put(n, Z[i], layer)`` for every neighbour ``n = neighbors[i]``, at once.

        The same seqlock writes, phase by phase over all neighbours (one
        ``Flush_all`` per phase with puts, one memory barrier with direct
        stores) instead of three flushes per neighbour: every slot still sees
        ``begin``, then its payload, then ``end``. A slot's write is in flight
        for the whole call, a little longer than with :meth:`put`; a reader then
        retries or falls back, as always.

        Parameters
        ----------
        Z : numpy.ndarray, shape (degree, rows, cols)
            ``Z[i]`` goes to ``neighbors[i]``: float64, each ``Z[i]`` C-contiguous
            (no copy is made). The :meth:`outbox` needs one put per neighbour and
            phase, any other array two.
        layer : int
            Non-negative layer index.
        """
        if Z.ndim != 3 or Z.shape[0] != len(self.neighbors):
            raise ValueError(f"Z must be (degree={len(self.neighbors)}, rows, cols), "
                             f"got shape {Z.shape}")
        if Z.dtype != np.float64 or Z.strides[1:] != (8 * Z.shape[2], 8):
            raise ValueError("Z must be float64 with C-contiguous Z[i]")
        self._write(self.neighbors, Z, layer)

    def _write(self, targets: tuple[int, ...], Z: np.ndarray, layer: int) -> None:
        """Seqlock writes of ``Z[k]`` (2-D each) to ``targets[k]``, three phases for all."""
        self._check_open()
        rows, cols = Z.shape[1:]
        size = rows * cols
        if size > self.max_elems:
            raise ValueError(f"Z has {size} elements, mailbox holds {self.max_elems}")
        if layer < 0:
            raise ValueError(f"layer must be >= 0, got {layer}")
        if not targets:
            return
        parity = layer % 2
        h = HEADER_WORDS - 2
        out = self._out
        # Z is the outbox (the same object as last time, or checked once): header and data
        # leave in one put per target.
        packed = Z is self._packed_z
        if not packed and (out is not None and Z.size > 0 and targets == self.neighbors
                           and Z.__array_interface__["data"][0] == out.ctypes.data + 8 * h
                           and (len(Z) == 1 or Z.strides[0] == out.strides[0])):
            packed, self._packed_z = True, Z
        # Headers and counters as arrays: one numpy call each for all targets.
        every = targets == self.neighbors
        ks = self._every if every else \
            np.array([self._in_slot[n] for n in targets], dtype=np.intp)
        counts = self._count_write(None if every else ks, layer)
        if packed:
            assert out is not None and self._out_i64 is not None
            heads, payload = self._out_i64, self._out_rows(size)
        else:
            heads, payload = self._header[: len(ks)], None
        if heads is not self._out_i64 or self._out_head != (layer, size, rows, cols):
            heads[...] = (layer, 0, size, rows, cols)
            self._out_head = (layer, size, rows, cols) if heads is self._out_i64 else ()
        heads[:, 1] = self._versions[layer] if every else self._versions[layer][ks]
        if self._seqlock is not None:
            assert self._node_i64 is not None and self._node_f64 is not None
            at = self._peer_at[parity] if every else self._peer_at[parity][ks]
            src, off = (out, h) if packed else (Z.reshape(len(ks), size), 0)
            self._seqlock.store(self._node_i64, self._node_f64, at, counts, heads, src, off,
                                size)
        elif self._node_f64 is not None:
            where = self._peer_idx[parity] if every else self._slot_indices(parity, ks)
            self._store(where, counts, heads, payload, Z, size)
        else:
            for k, c in enumerate(counts.tolist()):
                self._ctr[k][0] = c
            self._put(targets, self._out_at[parity], heads, payload, Z, size)
        self.puts += len(targets)
        self.bytes_sent += len(targets) * (HEADER_WORDS + size) * _WORD

    def _count_write(self, ks: np.ndarray | None, layer: int) -> np.ndarray:
        """Count one write of ``layer`` to each neighbour index in ``ks`` (None: all): its
        version (puts of the layer) and the slot's seqlock counter; returns the counters."""
        versions = self._versions.get(layer)
        if versions is None:
            versions = self._versions[layer] = np.zeros(len(self.neighbors), dtype=np.int64)
        seq = self._seq[layer % 2]
        if ks is None:
            versions += 1
            seq += 1
            return seq
        versions[ks] += 1
        seq[ks] += 1
        return seq[ks]

    def _slot_indices(self, parity: int, ks: np.ndarray) -> tuple[np.ndarray, ...]:
        """Where the writes to neighbour indices ``ks`` store, as indices into the node's
        memory: each slot's ``begin``, its header words (layer .. cols), its data start,
        its ``end``."""
        at = self._peer_at[parity][ks]
        return (at + _S_BEGIN, (at + _S_LAYER)[:, None] + np.arange(HEADER_WORDS - 2),
                at + HEADER_WORDS, at + _S_END)

    def _store(self, where: tuple[np.ndarray, ...], counts: np.ndarray, heads: np.ndarray,
               payload: list[np.ndarray] | None, Z: np.ndarray, size: int) -> None:
        """The seqlock writes as plain stores into the node's shared memory, at ``where``
        (:meth:`_slot_indices`), with counters ``counts``."""
        win, f64, i64 = self._win, self._node_f64, self._node_i64
        assert win is not None and f64 is not None and i64 is not None
        begin, head, data, end = where
        # Sync is a full memory barrier (osc/sm: opal_atomic_mb): every store before it
        # reaches memory before any store after it, so each target's memory sees begin,
        # then the payload, then end, as with the flushes of _put. The counters are aligned
        # 8-byte words, each stored in one piece.
        i64[begin] = counts
        win.Sync()
        i64[head] = heads
        for k, o in enumerate(data.tolist()):
            f64[o : o + size] = Z[k].reshape(-1) if payload is None else \
                payload[k][HEADER_WORDS - 2 :]
        win.Sync()
        i64[end] = counts
        win.Sync()  # end leaves the store buffer now, not at some later barrier

    def _put(self, targets: tuple[int, ...], at: dict[int, int], heads: np.ndarray,
             payload: list[np.ndarray] | None, Z: np.ndarray, size: int) -> None:
        """The seqlock writes as MPI puts, one flush per phase."""
        win, ctr = self._win, self._ctr
        assert win is not None
        offs = [at[n] for n in targets]  # the counters are in ctr[k]
        flush = win.Flush if len(targets) == 1 else (lambda _: win.Flush_all())
        # Each flush completes the puts before it at the target, which orders
        # begin < payload < end in every target's memory (see the class notes).
        for k, n in enumerate(targets):
            win.Put(ctr[k], n, offs[k] + _S_BEGIN)
        flush(targets[0])
        if payload is not None:
            for k, n in enumerate(targets):
                win.Put(payload[k], n, offs[k] + _S_LAYER)
        else:
            for k, n in enumerate(targets):
                win.Put(heads[k], n, offs[k] + _S_LAYER)
                if size:
                    win.Put(Z[k], n, offs[k] + HEADER_WORDS)  # straight from Z: no packing
        flush(targets[0])
        for k, n in enumerate(targets):
            win.Put(ctr[k], n, offs[k] + _S_END)
        flush(targets[0])

    def _recheck(self, copied: list[tuple[int, int, int, list[int]]]) -> list[bool]:
        """After the copies: for each ``(slot offset, e, ...)``, is ``begin`` still ``e``?"""
        assert self._win is not None and self._mv is not None
        self._win.Sync()  # my copies' loads before these (see the class notes)
        mv = self._mv
        return [mv[c[0] + _S_BEGIN] == c[1] for c in copied]

    def _refresh(self, layer: int, idx: list[int]) -> None:
        """Bring the kept copies of in-neighbours ``idx`` up to date for ``layer``.

        The seqlock read of the class notes, done for all of ``idx`` together: one
        ``Sync`` before their ``end`` counters, one before their ``begin``, one
        copy per slot written since its kept copy, one ``Sync`` before the second
        ``begin`` check. Slots that fail are tried again, ``_ATTEMPTS`` times in
        all; then they keep their last consistent copy (a fallback). Never waits.
        """
        if self._seqlock is not None:
            todo = self._every if idx is self._all else np.array(idx, dtype=np.intp)
            self._read_compiled(layer, todo, 0, self._no_rows, self._no_rows)
            return
        win, mv, f64 = self._win, self._mv, self._f64
        assert win is not None and mv is not None and f64 is not None
        parity = layer % 2
        at, kpar, kseq = self._slot_at[parity], self._kp, self._ks
        todo = idx
        for _ in range(_ATTEMPTS):
            win.Sync()  # completed puts visible to my loads; orders the loads below
            # A slot unchanged since the kept copy (same parity, same counter) is its copy;
            # one never written (e == 0) has nothing to copy.
            fresh = [(i, e) for i in todo for e in (mv[at[i] + _S_END],)
                     if e != 0 and not (kpar[i] == parity and kseq[i] == e)]
            if not fresh:
                return
            win.Sync()
            retry: list[int] = []
            copied: list[tuple[int, int, int, list[int]]] = []  # offset, e, i, header
            for i, e in fresh:
                off = at[i]
                if mv[off + _S_BEGIN] != e:  # a write is in flight: do not bother copying
                    retry.append(i)
                    continue
                copied.append((off, e, i, mv[off + _S_LAYER : off + HEADER_WORDS].tolist()))
            self._copy(copied)
            for (_, e, i, head), ok in zip(copied, self._recheck(copied)):
                if not ok:  # the copy overlapped a write: discard it
                    retry.append(i)
                    continue
                # Consistent: header and data are exactly write e of the slot.
                kpar[i], kseq[i] = parity, e
                self._k_head[i] = head
                self._spare[i] = 2 * i + self._kc[i]  # the old kept row takes the next copy
                self._kc[i] = 1 - self._kc[i]
            self._counts[0] += len(retry)
            todo = retry
            if not todo:
                return
        self._counts[1] += len(todo)  # every attempt overlapped a write

    def _read_compiled(self, layer: int, todo: np.ndarray, size: int, versions: np.ndarray,
                       rows: np.ndarray) -> int:
        """:meth:`_refresh` of ``todo`` (and, given one entry per neighbour in ``versions``
        and ``rows``, :meth:`read_rows`' choice of rows) in one compiled call; returns how
        many kept copies of ``layer`` do not hold ``size`` values."""
        assert self._seqlock is not None and self._i64 is not None and self._f64 is not None
        parity = layer % 2
        return self._seqlock.read_rows(
            self._i64, self._f64, self._at[parity], parity, todo, layer, size, _ATTEMPTS,
            self._second_check, self._k_parity, self._k_seq, self._k_head, self._cur,
            self._spare, self._table, versions, rows, self._work, self._fresh, self._counts)

    def _copy(self, copied: list[tuple[int, int, int, list[int]]]) -> None:
        """Copy each slot of ``copied`` (offset, e, i, header) into the row of in-neighbour
        ``i`` that is not its kept copy; valid only if the recheck accepts it."""
        f64, table = self._f64, self._table
        assert f64 is not None
        for off, _, i, head in copied:
            nelems = head[2]
            if 0 <= nelems <= self.max_elems:  # header and data are write e if valid
                table[self._spare[i], :nelems] = \
                    f64[off + HEADER_WORDS : off + HEADER_WORDS + nelems]

    def _kept_for(self, layer: int, i: int) -> tuple[int, np.ndarray | None, tuple[int, int]]:
        """``(version, data, shape)`` of the kept copy of in-neighbour ``i`` for ``layer``.

        ``data`` is a view of the kept copy (None with version 0 when there is
        nothing for ``layer``). A consistent copy whose header does not describe
        ``rows x cols`` values raises ValueError.
        """
        if self._kp[i] != layer % 2:
            return 0, None, (0, 0)
        layer_w, version, nelems, rows, cols = self._k_head[i].tolist()
        if layer_w != layer or version <= 0:
            return 0, None, (0, 0)  # the slot still holds another layer
        if not 0 <= nelems <= self.max_elems or rows * cols != nelems:
            raise ValueError(f"rank {self.neighbors[i]} wrote {nelems} values ({rows} x {cols}) "
                             f"for layer {layer}")
        return version, self._table[2 * i + self._kc[i], :nelems], (rows, cols)

    def read(self, n: int, layer: int) -> tuple[np.ndarray | None, int]:
        """Latest ``Z_{n,me}`` that neighbour ``n`` put for ``layer``.

        Never waits: if ``n`` is writing the slot during every attempt, returns
        the last consistent value this rank read from it (see the class notes).

        Parameters
        ----------
        n : int
            Neighbour rank.
        layer : int
            Layer index.

        Returns
        -------
        Z : numpy.ndarray or None
            A private copy shaped as ``n`` put it, or None if ``n`` has not written
            for this layer (or has already overwritten the slot with ``layer + 2``,
            which the engine contract rules out, or if no consistent copy could
            be made yet).
        version : int
            ``n``'s put counter for this layer (1, 2, ...), 0 when ``Z`` is None.
        """
        self._check_open()
        self._check_neighbor(n)
        i = self._in_slot[n]
        self._refresh(layer, [i])
        version, data, shape = self._kept_for(layer, i)
        if data is None:
            return None, 0
        return data.reshape(shape).copy(), version

    def read_all(self, layer: int, out: np.ndarray, versions: np.ndarray) -> None:
        """Copy every neighbour's latest Z for ``layer``; never waits.

        Parameters
        ----------
        layer : int
            Layer index.
        out : numpy.ndarray, shape (degree, rows, cols)
            Receives ``Z_{n,me}`` in the order of ``graph.neighbors(me)``; zeros
            for a neighbour that has not written for this layer (or of which no
            consistent copy exists yet).
        versions : numpy.ndarray of int64, shape (degree,)
            Receives each neighbour's put counter (0 when nothing was written).
            A value may be stale (a fallback) but never older than the previous
            call's for the same layer.
        """
        self._check_open()
        self._refresh(layer, self._all)
        for i in range(len(self.neighbors)):
            version, data, _ = self._kept_for(layer, i)
            versions[i] = version
            if data is None:
                out[i] = 0.0
            elif data.size != out[i].size:
                raise ValueError(f"rank {self.neighbors[i]} wrote {data.size} values for layer "
                                 f"{layer}, expected {out[i].size}")
            else:
                out[i] = data.reshape(out[i].shape)

    def read_rows(self, layer: int, size: int,
                  versions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every neighbour's latest Z for ``layer`` as rows of one table; never waits.

        The engine's read: no copy beyond the seqlock's own (one per slot written
        since the last read; none for an unchanged slot).

        Parameters
        ----------
        layer : int
            Layer index.
        size : int
            ``rows x cols`` every neighbour's Z must have.
        versions : numpy.ndarray of int64, shape (degree,)
            Receives each neighbour's put counter, as in :meth:`read_all`.

        Returns
        -------
        table : numpy.ndarray, shape (2 degree + 1, max_elems)
            The mailbox's copies (do not write to it); valid until the next read.
        rows : numpy.ndarray of intp, shape (degree,)
            ``table[rows[i], :size]`` is ``Z_{n,me}`` of ``n = neighbors[i]``, flat
            (a row of zeros for a neighbour that has not written for ``layer``).
        """
        self._check_open()
        if self._seqlock is not None:
            if self._read_compiled(layer, self._every, size, versions, self._rows):
                for i in self._all:  # raise on the copy of another size (or a bad header)
                    _, data, _ = self._kept_for(layer, i)
                    if data is not None and data.size != size:
                        raise ValueError(f"rank {self.neighbors[i]} wrote {data.size} values "
                                         f"for layer {layer}, expected {size}")
            return self._table, self._rows
        self._refresh(layer, self._all)
        nothing, parity = len(self._table) - 1, layer % 2
        found, rows = [0] * len(self._all), [nothing] * len(self._all)
        for i, (kpar, head) in enumerate(zip(self._k_parity.tolist(),
                                             self._k_head.tolist())):
            # The common case inline (a fresh or unchanged copy of this layer, the right size);
            # anything else goes through _kept_for, which also raises on a bad header.
            if kpar == parity and head[0] == layer and head[1] > 0 and head[2] == size \
                    and head[3] * head[4] == size:
                found[i], rows[i] = head[1], 2 * i + self._kc[i]
                continue
            version, data, _ = self._kept_for(layer, i)
            if data is not None:
                raise ValueError(f"rank {self.neighbors[i]} wrote {data.size} values for layer "
                                 f"{layer}, expected {size}")
        versions[:] = found
        self._rows[:] = rows
        return self._table, self._rows

    def read_views(
        self, layer: int, shape: tuple[int, int], versions: np.ndarray
    ) -> list[np.ndarray]:
        """Every neighbour's latest Z for ``layer`` without copying it out; never waits.

        :meth:`read_rows` as a list of arrays.

        Parameters
        ----------
        layer : int
            Layer index.
        shape : tuple of int
            ``(rows, cols)`` every neighbour's Z must have.
        versions : numpy.ndarray of int64, shape (degree,)
            Receives each neighbour's put counter, as in :meth:`read_all`.

        Returns
        -------
        list of numpy.ndarray
            ``Z_{n,me}`` in the order of ``graph.neighbors(me)``, read-only views
            valid until the next read of this mailbox (zeros for a neighbour that
            has not written for ``layer``).
        """
        rows, cols = shape
        table, which = self.read_rows(layer, rows * cols, versions)
        views = []
        for r in which.tolist():
            view = table[r, : rows * cols].reshape(rows, cols)
            view.flags.writeable = False
            views.append(view)
        return views

    # -- layer handshake --------------------------------------------------------

    def finish_layer(self, layer: int) -> None:
        """Announce to every neighbour that I am done with ``layer``.

        One 8-byte put per neighbour, then one flush. Announcements are
        monotone: announcing ``layer`` also covers every earlier layer, and
        announcing an earlier layer than before raises ValueError.
        """
        win = self._check_open()
        if layer < self._announced:
            raise ValueError(f"finish_layer({layer}) after finish_layer({self._announced})")
        self._announced = layer
        self._one[0] = layer
        for n in self.neighbors:
            win.Put(self._one, n, self._out_finished[n])
        win.Flush_all()

    def finished_layers(self) -> dict[int, int]:
        """Last layer each neighbour announced (-1 for none)."""
        win = self._check_open()
        assert self._i64 is not None
        deg = len(self.neighbors)
        win.Sync()  # make completed remote puts visible to my loads
        fin = self._i64[self._finished_off : self._finished_off + deg].copy()
        return {n: int(f) for n, f in zip(self.neighbors, fin)}

    def wait_neighbors_done(self, layer: int, timeout: float,
                            policy: WaitPolicy | None = None) -> float:
        """Block until every neighbour has announced ``finish_layer(layer)``.

        Polls under ``policy`` (default: sleeping between polls,
        :func:`dssfn_mpi.waiting.sleep_until`). No MPI progress is needed: puts
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
    def torn_retries(self) -> int:
        """Copies of a slot rejected because a write was in flight."""
        return int(self._counts[0])

    @property
    def fallbacks(self) -> int:
        """Reads of one neighbour's slot answered by the last consistent copy."""
        return int(self._counts[1])

    @property
    def compiled(self) -> bool:
        """True when the seqlock's reads and writes run compiled (:mod:`dssfn_mpi.seqlock`)."""
        return self._seqlock is not None

    def reset_counters(self) -> None:
        """Zero :attr:`puts`, :attr:`bytes_sent`, :attr:`torn_retries` and :attr:`fallbacks`."""
        self.puts = 0
        self.bytes_sent = 0
        self._counts[:] = 0

    @property
    def direct(self) -> bool:
        """True when Z is written with plain stores into the neighbours' shared memory,
        False when with ``MPI_Put`` (more than one node, or no shared window)."""
        return self._node_f64 is not None

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
        if self._mv is not None:
            self._mv.release()
        self._node_f64 = self._node_i64 = None
        self._mv = None
        self._f64 = None
        self._i64 = None

    def free(self) -> None:
        """Release the window (collective: every rank must call it). Idempotent."""
        if self._win is None:
            return
        self._close_epoch()
        self._drop_views()
        win, self._win = self._win, None
        win.Free()

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
            # Win.Free is collective: if only this rank failed, calling it would hang
            # here and the error would never reach the handler that aborts the job.
            # Close my epoch (local) and drop the views so exit is clean; the abort
            # (or finalize) reclaims MPI.
            try:
                self._close_epoch()
            except MPI.Exception:
                pass
            self._drop_views()
