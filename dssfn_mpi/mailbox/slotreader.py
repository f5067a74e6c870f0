"""The mailbox's seqlock reads: the neighbours' slots in this rank's window, never waiting.

A read loads a slot's ``end`` counter, copies header and data, and keeps the
copy only if ``begin`` still equals that counter afterwards (the proof is in
the notes of :class:`dssfn_mpi.mailbox.transport.ZMailbox`). A copy that fails is
retried at once, :data:`ATTEMPTS` times in all; then the read answers with
the last consistent copy (a fallback). One kept copy per neighbour lives in a
table of rows, which the engine reads directly.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from .rmawindow import MailboxWindow
from .slotlayout import BEGIN, END, HEADER_FIELDS, HEADER_WORDS, LAYER, SlotLayout

__all__ = ["ATTEMPTS", "SlotReader"]

#: Copies of one slot tried per read before falling back to the last consistent
#: value: the first try and two retries. Retries are immediate, never a wait.
ATTEMPTS = 3


class SlotReader:
    """This rank's reads of its window: the kept copies, the retries and the fallbacks.

    The last consistent copy of each in-neighbour's slot (one per neighbour,
    for the parity last read) is its parity, its counter, its header fields
    (layer .. cols) and its data in row ``2 i + kept_row_bit[i]`` of
    :attr:`table`; the other row of the pair receives the next copy. The last
    row of the table stays zero: "nothing yet".

    Parameters
    ----------
    layout : SlotLayout
        This rank's layout.
    window : MailboxWindow
        The open window.
    compiled : module or None
        :mod:`dssfn_mpi.mailbox.seqlock` to read with its compiled loop (direct stores
        only), or None.

    Attributes
    ----------
    counts : numpy.ndarray of int64, shape (2,)
        Copies rejected because a write was in flight (torn retries), and
        reads of one slot answered by a fallback.
    """

    #: The second load of ``begin`` after a copy (only the mutation control turns it off).
    second_check = True

    def __init__(self, layout: SlotLayout, window: MailboxWindow,
                 compiled: ModuleType | None) -> None:
        deg = layout.degree
        self.layout, self.window, self._compiled = layout, window, compiled
        # Where each in-slot starts, per parity: Python ints for the Python read (it looks
        # at every neighbour's counters in a loop, where numpy's per-call cost would
        # dominate) and arrays for the compiled one.
        self._slot_starts = [layout.in_slot_starts(parity) for parity in (0, 1)]
        self._slot_start_arrays = [np.array(s, dtype=np.intp) for s in self._slot_starts]
        self.kept_parity = np.full(deg, -1, dtype=np.int64)
        self.kept_counter = np.zeros(deg, dtype=np.int64)
        self.kept_header = np.zeros((deg, HEADER_FIELDS), dtype=np.int64)
        self.kept_header[:, 0] = -1
        self.table = np.zeros((2 * deg + 1, layout.max_elems))
        self.kept_row_bit = np.zeros(deg, dtype=np.int64)
        # The same as memoryviews for the Python read, whose per-neighbour indexing then
        # gives Python ints (as window.counters does).
        self._parity_of, self._counter_of, self._row_bit_of = (
            memoryview(a) for a in (self.kept_parity, self.kept_counter, self.kept_row_bit))
        # The row of the table that is not neighbour i's kept copy (the next copy goes there).
        self._spare_row = np.array([2 * i + 1 for i in range(deg)], dtype=np.intp)
        self._rows = np.empty(deg, dtype=np.intp)
        self.everyone = list(range(deg))  # every neighbour's index, for the Python read
        self._everyone_array = np.arange(deg, dtype=np.intp)  # ... and the compiled one
        # The compiled read's scratch.
        self._work = np.empty(deg, dtype=np.intp)
        self._fresh = np.empty((deg, HEADER_WORDS), dtype=np.int64)
        self._no_rows = np.empty(0, dtype=np.intp)
        self.counts = np.zeros(2, dtype=np.int64)

    @property
    def torn_retries(self) -> int:
        """Copies of a slot rejected because a write was in flight."""
        return int(self.counts[0])

    @property
    def fallbacks(self) -> int:
        """Reads of one neighbour's slot answered by the last consistent copy."""
        return int(self.counts[1])

    def refresh(self, layer: int, indices: list[int] | None = None) -> None:
        """Bring the kept copies of in-neighbours ``indices`` (None: all) up to date for
        ``layer``.

        The seqlock read done for all of them together: one ``Sync`` before
        their ``end`` counters, one before their ``begin``, one copy per slot
        written since its kept copy, one ``Sync`` before the second ``begin``
        check. Slots that fail are tried again, :data:`ATTEMPTS` times in all;
        then they keep their last consistent copy (a fallback). Never waits.
        """
        if self._compiled is not None:
            todo = self._everyone_array if indices is None else np.array(indices, dtype=np.intp)
            self._read_compiled(layer, todo, 0, self._no_rows, self._no_rows)
            return
        win, counters = self.window.check_open(), self.window.counters
        assert counters is not None
        parity = layer % 2
        starts, kept_parity, kept_counter = \
            self._slot_starts[parity], self._parity_of, self._counter_of
        todo = self.everyone if indices is None else indices
        for _ in range(ATTEMPTS):
            win.Sync()  # completed puts visible to my loads; orders the loads below
            # A slot unchanged since the kept copy (same parity, same counter) is its copy;
            # one never written (e == 0) has nothing to copy.
            fresh = [(i, e) for i in todo for e in (counters[starts[i] + END],)
                     if e != 0 and not (kept_parity[i] == parity and kept_counter[i] == e)]
            if not fresh:
                return
            win.Sync()
            retry: list[int] = []
            copied: list[tuple[int, int, int, list[int]]] = []  # start, e, i, header fields
            for i, e in fresh:
                start = starts[i]
                if counters[start + BEGIN] != e:  # a write is in flight: do not bother copying
                    retry.append(i)
                    continue
                head = counters[start + LAYER : start + HEADER_WORDS].tolist()
                copied.append((start, e, i, head))
            self._copy(copied)
            for (_, e, i, head), ok in zip(copied, self._recheck(copied)):
                if not ok:  # the copy overlapped a write: discard it
                    retry.append(i)
                    continue
                # Consistent: header and data are exactly write e of the slot.
                kept_parity[i], kept_counter[i] = parity, e
                self.kept_header[i] = head
                self._spare_row[i] = 2 * i + self._row_bit_of[i]  # the old kept row: next copy
                self._row_bit_of[i] = 1 - self._row_bit_of[i]
            self.counts[0] += len(retry)
            todo = retry
            if not todo:
                return
        self.counts[1] += len(todo)  # every attempt overlapped a write

    def _read_compiled(self, layer: int, todo: np.ndarray, size: int, versions: np.ndarray,
                       rows: np.ndarray) -> int:
        """:meth:`refresh` of ``todo`` (and, given one entry per neighbour in ``versions``
        and ``rows``, :meth:`read_rows`' choice of rows) in one compiled call; returns how
        many kept copies of ``layer`` do not hold ``size`` values."""
        words, values = self.window.words, self.window.values
        assert self._compiled is not None and words is not None and values is not None
        parity = layer % 2
        return self._compiled.read_rows(
            words, values, self._slot_start_arrays[parity], parity, todo, layer, size,
            ATTEMPTS, self.second_check, self.kept_parity, self.kept_counter, self.kept_header,
            self.kept_row_bit, self._spare_row, self.table, versions, rows, self._work,
            self._fresh, self.counts)

    def _copy(self, copied: list[tuple[int, int, int, list[int]]]) -> None:
        """Copy each slot of ``copied`` (start, e, i, header fields) into the row of
        in-neighbour ``i`` that is not its kept copy; valid only if the recheck accepts it."""
        values, table = self.window.values, self.table
        assert values is not None
        for start, _, i, head in copied:
            nelems = head[2]
            if 0 <= nelems <= self.layout.max_elems:  # header and data are write e if valid
                table[self._spare_row[i], :nelems] = \
                    values[start + HEADER_WORDS : start + HEADER_WORDS + nelems]

    def _recheck(self, copied: list[tuple[int, int, int, list[int]]]) -> list[bool]:
        """After the copies: for each ``(slot start, e, ...)``, is ``begin`` still ``e``?"""
        win, counters = self.window.check_open(), self.window.counters
        assert counters is not None
        win.Sync()  # my copies' loads before these (see the ZMailbox notes)
        return [counters[c[0] + BEGIN] == c[1] for c in copied]

    def kept(self, layer: int, i: int) -> tuple[int, np.ndarray | None, tuple[int, int]]:
        """``(version, data, shape)`` of the kept copy of in-neighbour ``i`` for ``layer``.

        ``data`` is a view of the kept copy (None with version 0 when there is
        nothing for ``layer``). A consistent copy whose header does not describe
        ``rows x cols`` values raises ValueError.
        """
        if self._parity_of[i] != layer % 2:
            return 0, None, (0, 0)
        layer_w, version, nelems, rows, cols = self.kept_header[i].tolist()
        if layer_w != layer or version <= 0:
            return 0, None, (0, 0)  # the slot still holds another layer
        if not 0 <= nelems <= self.layout.max_elems or rows * cols != nelems:
            raise ValueError(f"rank {self.layout.neighbors[i]} wrote {nelems} values "
                             f"({rows} x {cols}) for layer {layer}")
        return version, self.table[2 * i + self._row_bit_of[i], :nelems], (rows, cols)

    def _wrong_size(self, i: int, got: int, layer: int, size: int) -> ValueError:
        return ValueError(f"rank {self.layout.neighbors[i]} wrote {got} values for layer "
                          f"{layer}, expected {size}")

    def read_rows(self, layer: int, size: int,
                  versions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every neighbour's latest Z for ``layer`` as rows of :attr:`table`
        (:meth:`dssfn_mpi.mailbox.transport.ZMailbox.read_rows`)."""
        self.window.check_open()
        if self._compiled is not None:
            if self._read_compiled(layer, self._everyone_array, size, versions, self._rows):
                for i in self.everyone:  # raise on the copy of another size (or a bad header)
                    _, data, _ = self.kept(layer, i)
                    if data is not None and data.size != size:
                        raise self._wrong_size(i, data.size, layer, size)
            return self.table, self._rows
        self.refresh(layer)
        nothing, parity = len(self.table) - 1, layer % 2
        found, rows = [0] * len(self.everyone), [nothing] * len(self.everyone)
        for i, (kept_parity, head) in enumerate(zip(self.kept_parity.tolist(),
                                                    self.kept_header.tolist())):
            # The common case inline (a fresh or unchanged copy of this layer, the right size);
            # anything else goes through kept(), which also raises on a bad header.
            if kept_parity == parity and head[0] == layer and head[1] > 0 and head[2] == size \
                    and head[3] * head[4] == size:
                found[i], rows[i] = head[1], 2 * i + self._row_bit_of[i]
                continue
            _, data, _ = self.kept(layer, i)
            if data is not None:
                raise self._wrong_size(i, data.size, layer, size)
        versions[:] = found
        self._rows[:] = rows
        return self.table, self._rows
