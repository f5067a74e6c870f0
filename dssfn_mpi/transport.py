"""One-sided RMA mailboxes for the dual variables Z of the asynchronous engine.

Node ``m`` writes its ``Z_{m,n}`` straight into neighbour ``n``'s memory with
``MPI_Put`` while ``n`` keeps computing: no message, no handshake, no matching
receive. ``n`` reads the latest value whenever it activates. This is the
communication pattern of ARock-style asynchronous ADMM.

Two facts measured on our machines shape this module (``shared/NOTES-mpi.md``):

* Only MPI-*allocated* windows (``Win.Allocate``) are truly passive: a put into a
  ``Win.Create`` window over user memory completes only when the target next
  enters MPI, which defeats the point. :func:`passive_put_check` tests this.
* Windows use the unified memory model, so a reader can see a half-written Z
  while a put is in flight. Every access here therefore happens under an
  exclusive lock of the window that holds the data: writers lock the target,
  the owner locks itself while copying out. A torn read is impossible, not
  merely unlikely.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Protocol

import numpy as np
from mpi4py import MPI

from dssfn_mpi.errors import require

__all__ = ["HEADER_WORDS", "NeighborTimeout", "ZMailbox", "passive_put_check"]

# Slot header, int64: layer, version, number of elements, rows, cols.
HEADER_WORDS = 5
_H_LAYER, _H_VERSION, _H_NELEMS, _H_ROWS, _H_COLS = range(HEADER_WORDS)
_WORD = 8  # every entry is 8 bytes, so disp_unit=8 and everything stays aligned

_BACKOFF_MIN = 50e-6
_BACKOFF_MAX = 10e-3


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
    ``[layer, version, nelems, rows, cols]`` followed by the float64 data — and
    after all slots one int64 "finished layer" entry per in-neighbour (initially
    -1).

    Protocol: a writer locks the *target's* window (shared: writers only touch
    their own slots, so they need not exclude each other), puts header and
    data, and unlocks; when ``Unlock`` returns the data is in the target's
    memory. The owner reads under an exclusive lock of its *own* window, which
    excludes every writer, so a read and a write of a slot never overlap.

    Contract with the engine
        A slot is reused every second layer. Before its first :meth:`put` of
        layer ``l`` a rank must call ``wait_neighbors_done(l - 2)``, so that no
        neighbour is still reading layer ``l - 2`` from the slot that layer ``l``
        overwrites. A neighbour one layer ahead is harmless: it writes the other
        parity, and the final layer-``l - 1`` values stay readable.

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

    Attributes
    ----------
    puts : int
        Number of Z puts since creation or :meth:`reset_counters`.
    bytes_sent : int
        Bytes moved by those puts, header included.
    signals : int
        Number of "finished layer" announcements sent (one per neighbour).
    lock_seconds : float
        Time spent acquiring window locks in put/read/finish_layer/finished_layers,
        i.e. waiting for another rank's access to the same window to end.
    """

    def __init__(self, comm: MPI.Intracomm, graph: GraphLike, max_elems: int) -> None:
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

        self._win: MPI.Win | None = MPI.Win.Allocate(words * _WORD, _WORD, comm=comm)
        mem = self._win.tomemory()
        # The only views of window memory; free() drops them before Win.Free().
        self._f64: np.ndarray | None = np.frombuffer(mem, dtype=np.float64, count=words)
        self._i64: np.ndarray | None = np.frombuffer(mem, dtype=np.int64, count=words)
        del mem
        self._win.Lock(me, MPI.LOCK_EXCLUSIVE)
        for k in range(deg):
            for parity in (0, 1):
                off = self._slot_offset(k, parity)
                self._i64[off : off + HEADER_WORDS] = (-1, 0, 0, 0, 0)
        self._i64[self._finished_off : self._finished_off + deg] = -1
        self._win.Unlock(me)
        # Nobody may put before every target has initialised its headers.
        comm.Barrier()

        self._header = np.zeros(HEADER_WORDS, dtype=np.int64)  # reusable send header
        self._one = np.zeros(1, dtype=np.int64)  # reusable send word
        self._versions: dict[tuple[int, int], int] = {}
        self._announced = -1  # last layer I announced with finish_layer
        self.puts = 0
        self.bytes_sent = 0
        self.signals = 0
        self.lock_seconds = 0.0

    # -- layout -----------------------------------------------------------------

    def _slot_offset(self, k: int, parity: int) -> int:
        """Word offset of slot ``k`` (sender index), parity ``parity``."""
        return (2 * k + parity) * self._slot_words

    def _check_open(self) -> MPI.Win:
        if self._win is None:
            raise RuntimeError("ZMailbox used after free()")
        return self._win

    def _lock(self, win: MPI.Win, target: int, shared: bool = False) -> None:
        # Open MPI's osc/sm lock spins: under oversubscription a descheduled
        # holder or waiter stalls the queue, so time it. Writers take the lock
        # shared (each writes only its own slot, so writers never conflict);
        # the owner's exclusive lock still excludes every writer while it reads.
        t0 = time.perf_counter()
        win.Lock(target, MPI.LOCK_SHARED if shared else MPI.LOCK_EXCLUSIVE)
        self.lock_seconds += time.perf_counter() - t0

    def _check_neighbor(self, n: int) -> None:
        if n not in self._in_slot:
            raise ValueError(f"rank {n} is not a neighbour of rank {self.rank}")

    # -- data -------------------------------------------------------------------

    def put(self, n: int, Z: np.ndarray, layer: int) -> None:
        """Write my ``Z_{me,n}`` for ``layer`` into neighbour ``n``'s window.

        Returns when the data is in ``n``'s memory; ``Z`` may be modified at once.
        The version seen by ``n`` counts my puts to ``n`` for this layer (1, 2, ...).

        Parameters
        ----------
        n : int
            Neighbour rank.
        Z : numpy.ndarray
            2-D array with at most ``max_elems`` elements (converted to float64).
        layer : int
            Non-negative layer index; selects the parity slot ``layer % 2``.
        """
        win = self._check_open()
        self._check_neighbor(n)
        Z = np.ascontiguousarray(Z, dtype=np.float64)  # no copy in the usual case
        if Z.ndim != 2:
            raise ValueError(f"Z must be 2-D, got shape {Z.shape}")
        if Z.size > self.max_elems:
            raise ValueError(f"Z has {Z.size} elements, mailbox holds {self.max_elems}")
        if layer < 0:
            raise ValueError(f"layer must be >= 0, got {layer}")
        key = (n, layer)
        version = self._versions.get(key, 0) + 1
        self._versions[key] = version
        h = self._header
        h[_H_LAYER], h[_H_VERSION], h[_H_NELEMS] = layer, version, Z.size
        h[_H_ROWS], h[_H_COLS] = Z.shape
        off = self._slot_offset(self._out_slot[n], layer % 2)
        # Two puts in one exclusive epoch are as atomic for the reader as one, and
        # putting Z directly saves packing it into a send buffer (a full extra copy).
        self._lock(win, n, shared=True)
        win.Put(h, n, off)
        if Z.size:
            win.Put(Z, n, off + HEADER_WORDS)
        win.Unlock(n)
        self.puts += 1
        self.bytes_sent += (HEADER_WORDS + Z.size) * _WORD

    def read(self, n: int, layer: int) -> tuple[np.ndarray | None, int]:
        """Latest ``Z_{n,me}`` that neighbour ``n`` put for ``layer``.

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
            which the engine contract rules out).
        version : int
            ``n``'s put counter for this layer (1, 2, ...), 0 when ``Z`` is None.
        """
        win = self._check_open()
        self._check_neighbor(n)
        assert self._i64 is not None and self._f64 is not None
        off = self._slot_offset(self._in_slot[n], layer % 2)
        me = self.rank
        # Exclusive lock on my own window: no writer's epoch can overlap the copy.
        self._lock(win, me)
        try:
            win.Sync()  # make completed remote puts visible to my loads
            layer_w, version, nelems, rows, cols = (
                int(x) for x in self._i64[off : off + HEADER_WORDS]
            )
            if layer_w != layer or version <= 0:
                return None, 0
            data = self._f64[off + HEADER_WORDS : off + HEADER_WORDS + nelems].copy()
        finally:
            win.Unlock(me)
        return data.reshape(rows, cols), version

    def read_all(self, layer: int, out: np.ndarray, versions: np.ndarray) -> None:
        """Copy every neighbour's latest Z for ``layer`` under one lock of my window.

        One lock per activation instead of one per neighbour: under
        oversubscription every lock is a chance to queue behind a descheduled rank.

        Parameters
        ----------
        layer : int
            Layer index.
        out : numpy.ndarray, shape (degree, rows, cols)
            Receives ``Z_{n,me}`` in the order of ``graph.neighbors(me)``; zeros
            for a neighbour that has not written for this layer.
        versions : numpy.ndarray of int64, shape (degree,)
            Receives each neighbour's put counter (0 when nothing was written).
        """
        win = self._check_open()
        assert self._i64 is not None and self._f64 is not None
        nelems_expected = out[0].size if len(out) else 0
        me = self.rank
        self._lock(win, me)
        try:
            win.Sync()  # make completed remote puts visible to my loads
            for i, n in enumerate(self.neighbors):
                off = self._slot_offset(self._in_slot[n], layer % 2)
                layer_w, version, nelems = (int(x) for x in self._i64[off : off + 3])
                if layer_w != layer or version <= 0:
                    out[i] = 0.0
                    versions[i] = 0
                    continue
                if nelems != nelems_expected:
                    raise ValueError(
                        f"rank {n} wrote {nelems} values for layer {layer}, expected "
                        f"{nelems_expected}"
                    )
                out[i].reshape(-1)[:] = self._f64[off + HEADER_WORDS : off + HEADER_WORDS + nelems]
                versions[i] = version
        finally:
            win.Unlock(me)

    # -- layer handshake --------------------------------------------------------

    def finish_layer(self, layer: int) -> None:
        """Announce to every neighbour that I am done with ``layer``.

        One 8-byte put per neighbour. Announcements are monotone: announcing
        ``layer`` also covers every earlier layer, and announcing an earlier
        layer than before raises ValueError.
        """
        win = self._check_open()
        if layer < self._announced:
            raise ValueError(f"finish_layer({layer}) after finish_layer({self._announced})")
        self._announced = layer
        self._one[0] = layer
        for n in self.neighbors:
            self._lock(win, n, shared=True)
            win.Put(self._one, n, self._out_finished[n])
            win.Unlock(n)
            self.signals += 1

    def finished_layers(self) -> dict[int, int]:
        """Last layer each neighbour announced (-1 for none), read under the self-lock."""
        win = self._check_open()
        assert self._i64 is not None
        deg = len(self.neighbors)
        me = self.rank
        self._lock(win, me)
        try:
            win.Sync()
            fin = self._i64[self._finished_off : self._finished_off + deg].copy()
        finally:
            win.Unlock(me)
        return {n: int(f) for n, f in zip(self.neighbors, fin)}

    def wait_neighbors_done(self, layer: int, timeout: float) -> float:
        """Block until every neighbour has announced ``finish_layer(layer)``.

        Sleeps between polls with exponential backoff from 50 us to 10 ms instead
        of spinning, so on an oversubscribed node the CPU goes to ranks that
        still compute. No MPI progress is needed: puts into allocated windows
        complete without the target's help.

        Parameters
        ----------
        layer : int
            Layer to wait for; a neighbour that announced a later one counts.
        timeout : float
            Seconds before giving up.

        Returns
        -------
        float
            Seconds waited.

        Raises
        ------
        NeighborTimeout
            Naming the neighbours that stayed silent.
        """
        t0 = time.perf_counter()
        delay = _BACKOFF_MIN
        while True:
            fin = self.finished_layers()
            silent = tuple(n for n, f in fin.items() if f < layer)
            waited = time.perf_counter() - t0
            if not silent:
                return waited
            if waited >= timeout:
                raise NeighborTimeout(layer, silent, waited)
            time.sleep(min(delay, max(timeout - waited, 0.0)))
            delay = min(2 * delay, _BACKOFF_MAX)

    # -- bookkeeping ------------------------------------------------------------

    def reset_counters(self) -> None:
        """Zero :attr:`puts`, :attr:`bytes_sent`, :attr:`signals` and :attr:`lock_seconds`."""
        self.puts = 0
        self.bytes_sent = 0
        self.signals = 0
        self.lock_seconds = 0.0

    @property
    def closed(self) -> bool:
        """True after :meth:`free`."""
        return self._win is None

    def _drop_views(self) -> None:
        # A numpy view alive at Win.Free() ended in "double free or corruption".
        self._f64 = None
        self._i64 = None

    def free(self) -> None:
        """Release the window (collective: every rank must call it). Idempotent."""
        if self._win is None:
            return
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
            # Drop the views so exit is clean; the abort (or finalize) reclaims MPI.
            self._drop_views()


def passive_put_check(
    comm: MPI.Intracomm, sleep: float = 1.0, allocate: bool = True, nbytes: int = 1 << 20
) -> dict[str, Any]:
    """Does a put complete while its target sits outside MPI? (collective)

    Rank 0 sleeps in ``time.sleep`` for ``sleep`` seconds, making no MPI call,
    while rank 1 does ``Lock`` / ``Put`` (``nbytes``) / ``Unlock`` into rank 0's
    window and times it — IMB-RMA's "truly passive put". Other ranks only take
    part in the collectives.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        At least 2 ranks.
    sleep : float
        Seconds rank 0 stays out of MPI.
    allocate : bool
        True: ``Win.Allocate`` (what :class:`ZMailbox` uses). False:
        ``Win.Create`` over a numpy buffer, which stalls on plain Open MPI and
        fails at once with ``OMPI_MCA_osc=sm``; a failure is reported, not raised.
    nbytes : int
        Size of the put.

    Returns
    -------
    dict
        The same on every rank: ``put_seconds`` (nan on error), ``sleep_seconds``,
        ``passive`` (``put_seconds < 0.25 * sleep``), ``data_ok`` (rank 0 saw
        the data after waking), ``allocate``, ``nbytes`` and ``error`` (None or
        the MPI error text).
    """
    require(comm.Get_size() >= 2, "the passive-put check needs at least 2 MPI ranks")
    rank = comm.Get_rank()
    words = max(nbytes // _WORD, 1)
    mine = words if rank == 0 else 1
    win: MPI.Win | None = None
    local: np.ndarray | None = None
    error: str | None = None
    try:
        if allocate:
            win = MPI.Win.Allocate(mine * _WORD, _WORD, comm=comm)
        else:
            local = np.zeros(mine, dtype=np.float64)
            win = MPI.Win.Create(local, _WORD, comm=comm)
    except MPI.Exception as e:
        error = str(e).strip()
    # Agree on failure everywhere so no rank goes on into a collective alone.
    errors = comm.allgather(error)
    error = next((e for e in errors if e is not None), None)
    if error is not None:
        if win is not None:  # created here but failed elsewhere: cannot free collectively
            win = None
        return {
            "put_seconds": float("nan"),
            "sleep_seconds": 0.0,
            "passive": False,
            "data_ok": False,
            "allocate": allocate,
            "nbytes": words * _WORD,
            "error": error,
        }
    assert win is not None
    payload = np.arange(words, dtype=np.float64) + 0.5
    if rank == 0:
        win.Lock(0, MPI.LOCK_EXCLUSIVE)
        view = np.frombuffer(win.tomemory(), dtype=np.float64, count=words)
        view[:] = 0.0
        del view
        win.Unlock(0)
    comm.Barrier()
    put_seconds = float("nan")
    sleep_seconds = 0.0
    if rank == 0:
        t0 = time.perf_counter()
        time.sleep(sleep)
        sleep_seconds = time.perf_counter() - t0
    elif rank == 1:
        time.sleep(min(0.1 * sleep, 0.1))  # be sure rank 0 is already asleep
        t0 = time.perf_counter()
        win.Lock(0, MPI.LOCK_EXCLUSIVE)
        win.Put(payload, 0, 0)
        win.Unlock(0)
        put_seconds = time.perf_counter() - t0
    comm.Barrier()
    data_ok = False
    if rank == 0:
        win.Lock(0, MPI.LOCK_EXCLUSIVE)
        win.Sync()
        view = np.frombuffer(win.tomemory(), dtype=np.float64, count=words)
        data_ok = bool(np.array_equal(view, payload))
        del view
        win.Unlock(0)
    put_seconds = comm.bcast(put_seconds, root=1)
    sleep_seconds, data_ok = comm.bcast((sleep_seconds, data_ok), root=0)
    win.Free()
    del local
    return {
        "put_seconds": put_seconds,
        "sleep_seconds": sleep_seconds,
        "passive": bool(put_seconds < 0.25 * sleep),
        "data_ok": data_ok,
        "allocate": allocate,
        "nbytes": words * _WORD,
        "error": None,
    }
