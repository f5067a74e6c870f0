"""The mailbox's seqlock writes: this rank's Z into its slots in its neighbours' windows.

Every write of a slot is three phases, ``begin = s``, then header and data,
then ``end = s`` (``s`` counts the writes to the slot), each phase complete in
the target's memory before the next starts: a flush after each phase of puts,
a full memory barrier (``Win.Sync``) after each phase of plain stores into a
shared window, or the compiled loop of :mod:`dssfn_mpi.mailbox.seqlock` with its
fences. Why that order is all a reader needs is in the notes of
:class:`dssfn_mpi.mailbox.transport.ZMailbox`.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
from mpi4py import MPI

from .rmawindow import MailboxWindow
from .slotlayout import (
    BEGIN,
    END,
    HEADER_FIELDS,
    HEADER_WORDS,
    LAYER,
    SlotLayout,
    field_indices,
    write_bytes,
)

__all__ = ["SlotWriter"]


class SlotWriter:
    """This rank's writes: counters, versions, the outbox, and the three phases.

    Parameters
    ----------
    layout : SlotLayout
        This rank's layout (where its slots are in its neighbours' windows).
    window : MailboxWindow
        The open window (and, when shared, the neighbours' memory).
    compiled : module or None
        :mod:`dssfn_mpi.mailbox.seqlock` to write with its compiled loop (direct stores
        only), or None.

    Attributes
    ----------
    puts : int
        Writes of one neighbour's slot so far.
    bytes_sent : int
        Bytes those writes moved, header and counters included.
    versions : dict of int to numpy.ndarray
        Per layer, the writes of that layer to each neighbour (the version a
        reader sees).
    """

    def __init__(self, layout: SlotLayout, window: MailboxWindow,
                 compiled: ModuleType | None) -> None:
        deg = layout.degree
        self.layout, self.window, self._compiled = layout, window, compiled
        self.everyone = np.arange(deg, dtype=np.intp)  # every neighbour's index
        # Where my slot in each neighbour's window starts, per parity: in that window
        # (puts) and, with a shared window, in the node's memory (stores).
        self._window_starts = [{n: layout.out_slot_start(i, parity)
                                for i, n in enumerate(layout.neighbors)} for parity in (0, 1)]
        self._node_starts = [np.array([window.node_start[n] + layout.out_slot_start(i, parity)
                                       for i, n in enumerate(layout.neighbors)], dtype=np.intp)
                             for parity in (0, 1)] if window.shared else []
        self._node_fields = [field_indices(s) for s in self._node_starts]
        # Reusable header fields and counter words, one per neighbour.
        self._headers = np.zeros((max(deg, 1), HEADER_FIELDS), dtype=np.int64)
        self._counter_words = [np.zeros(1, dtype=np.int64) for _ in range(max(deg, 1))]
        self.versions: dict[int, np.ndarray] = {}
        self._slot_writes = np.zeros((2, max(deg, 1)), dtype=np.int64)  # seqlock counter s
        # The outbox (see outbox()): per neighbour its header fields and data in one row,
        # so that a write's payload is one put. Allocated on first use.
        self._outbox: np.ndarray | None = None
        self._outbox_fields: np.ndarray | None = None  # its header words, as int64 rows
        self._outbox_header: tuple[int, ...] = ()  # (layer, size, rows, cols) written there
        self._outbox_z: np.ndarray | None = None  # the last view of it write() was given
        self._outbox_rows: tuple[int, list[np.ndarray]] = (-1, [])  # _payload_rows' cache
        self.puts = 0
        self.bytes_sent = 0

    def outbox(self) -> tuple[np.ndarray, int]:
        """The send buffer and where its data start (:meth:`ZMailbox.outbox`)."""
        if self._outbox is None:
            self._outbox = np.zeros((self.layout.degree, HEADER_FIELDS + self.layout.max_elems))
            self._outbox_fields = self._outbox[:, :HEADER_FIELDS].view(np.int64)
        return self._outbox, HEADER_FIELDS

    def _payload_rows(self, size: int) -> list[np.ndarray]:
        """Per neighbour, the outbox's header fields and ``size`` values as one array."""
        if self._outbox_rows[0] != size:
            assert self._outbox is not None
            self._outbox_rows = (size, [row[: HEADER_FIELDS + size] for row in self._outbox])
        return self._outbox_rows[1]

    def _is_outbox(self, Z: np.ndarray, everyone: bool) -> bool:
        """True when ``Z`` is a view of the outbox's data (the same object as last time, or
        checked once): header and data then leave in one put per target."""
        if Z is self._outbox_z:
            return True
        out = self._outbox
        if (out is not None and Z.size > 0 and everyone
                and Z.__array_interface__["data"][0] == out.ctypes.data + 8 * HEADER_FIELDS
                and (len(Z) == 1 or Z.strides[0] == out.strides[0])):
            self._outbox_z = Z
            return True
        return False

    def count(self, indices: np.ndarray | None, layer: int) -> np.ndarray:
        """Count one write of ``layer`` to each neighbour index in ``indices`` (None: all):
        its version (writes of the layer) and the slot's seqlock counter; returns the
        counters."""
        versions = self.versions.get(layer)
        if versions is None:
            versions = self.versions[layer] = np.zeros(self.layout.degree, dtype=np.int64)
        counters = self._slot_writes[layer % 2]
        if indices is None:
            versions += 1
            counters += 1
            return counters
        versions[indices] += 1
        counters[indices] += 1
        return counters[indices]

    def write(self, targets: tuple[int, ...], Z: np.ndarray, layer: int) -> None:
        """Seqlock writes of ``Z[k]`` (2-D each) to ``targets[k]``, three phases for all."""
        win = self.window.check_open()
        rows, cols = Z.shape[1:]
        size = rows * cols
        if size > self.layout.max_elems:
            raise ValueError(f"Z has {size} elements, mailbox holds {self.layout.max_elems}")
        if layer < 0:
            raise ValueError(f"layer must be >= 0, got {layer}")
        if not targets:
            return
        parity = layer % 2
        everyone = targets == self.layout.neighbors
        packed = self._is_outbox(Z, everyone)
        # Headers and counters as arrays: one numpy call each for all targets.
        indices = self.everyone if everyone else \
            np.array([self.layout.index_of(n) for n in targets], dtype=np.intp)
        counts = self.count(None if everyone else indices, layer)
        heads, payload = self._header_fields(packed, len(indices), layer, rows, cols)
        heads[:, 1] = self.versions[layer] if everyone else self.versions[layer][indices]
        if self._compiled is not None:
            window = self.window
            assert window.node_words is not None and window.node_values is not None
            starts = self._node_starts[parity] if everyone else self._node_starts[parity][indices]
            src, off = (self._outbox, HEADER_FIELDS) if packed else (Z.reshape(len(indices),
                                                                               size), 0)
            self._compiled.store(window.node_words, window.node_values, starts, counts, heads,
                                 src, off, size)
        elif self.window.shared:
            where = self._node_fields[parity] if everyone else \
                field_indices(self._node_starts[parity][indices])
            self._store(win, where, counts, heads, payload, Z, size)
        else:
            for k, c in enumerate(counts.tolist()):
                self._counter_words[k][0] = c
            self._put(win, targets, self._window_starts[parity], heads, payload, Z, size)
        self.puts += len(targets)
        self.bytes_sent += len(targets) * write_bytes(size)

    def _header_fields(self, packed: bool, count: int, layer: int, rows: int,
                       cols: int) -> tuple[np.ndarray, list[np.ndarray] | None]:
        """The header fields to write (versions still to fill in) and, when ``Z`` is the
        outbox, each target's header and data as one array."""
        size = rows * cols
        if packed:
            assert self._outbox_fields is not None
            heads, payload = self._outbox_fields, self._payload_rows(size)
        else:
            heads, payload = self._headers[:count], None
        if heads is not self._outbox_fields or self._outbox_header != (layer, size, rows, cols):
            heads[...] = (layer, 0, size, rows, cols)
            self._outbox_header = (layer, size, rows, cols) if heads is self._outbox_fields \
                else ()
        return heads, payload

    def _store(self, win: MPI.Win, where: tuple[np.ndarray, ...], counts: np.ndarray,
               heads: np.ndarray, payload: list[np.ndarray] | None, Z: np.ndarray,
               size: int) -> None:
        """The seqlock writes as plain stores into the node's shared memory, at ``where``
        (:func:`dssfn_mpi.mailbox.slotlayout.field_indices`), with counters ``counts``."""
        values, words = self.window.node_values, self.window.node_words
        assert values is not None and words is not None
        begin, head, data, end = where
        # Sync is a full memory barrier (osc/sm: opal_atomic_mb): every store before it
        # reaches memory before any store after it, so each target's memory sees begin,
        # then the payload, then end, as with the flushes of _put. The counters are aligned
        # 8-byte words, each stored in one piece.
        words[begin] = counts
        win.Sync()
        words[head] = heads
        for k, o in enumerate(data.tolist()):
            values[o : o + size] = Z[k].reshape(-1) if payload is None else \
                payload[k][HEADER_FIELDS:]
        win.Sync()
        words[end] = counts
        win.Sync()  # end leaves the store buffer now, not at some later barrier

    def _put(self, win: MPI.Win, targets: tuple[int, ...], starts: dict[int, int],
             heads: np.ndarray, payload: list[np.ndarray] | None, Z: np.ndarray, size: int) -> None:
        """The seqlock writes as MPI puts, one flush per phase."""
        counter = self._counter_words
        offs = [starts[n] for n in targets]  # the counters are in counter[k]
        flush = win.Flush if len(targets) == 1 else (lambda _: win.Flush_all())
        # Each flush completes the puts before it at the target, which orders
        # begin < payload < end in every target's memory (see the ZMailbox notes).
        for k, n in enumerate(targets):
            win.Put(counter[k], n, offs[k] + BEGIN)
        flush(targets[0])
        if payload is not None:
            for k, n in enumerate(targets):
                win.Put(payload[k], n, offs[k] + LAYER)
        else:
            for k, n in enumerate(targets):
                win.Put(heads[k], n, offs[k] + LAYER)
                if size:
                    win.Put(Z[k], n, offs[k] + HEADER_WORDS)  # straight from Z: no packing
        flush(targets[0])
        for k, n in enumerate(targets):
            win.Put(counter[k], n, offs[k] + END)
        flush(targets[0])
