"""The mailbox's slot layout, without MPI: every rank's writes land where its neighbour reads."""

from __future__ import annotations

import numpy as np
import pytest

from dssfn_mpi.mailbox import seqlock
from dssfn_mpi.mailbox.slotlayout import (
    BEGIN,
    COLS,
    EMPTY_HEADER,
    END,
    HEADER_FIELDS,
    HEADER_WORDS,
    LAYER,
    NELEMS,
    ROWS,
    VERSION,
    SlotLayout,
    field_indices,
    write_bytes,
)


class Graph:
    def __init__(self, n: int, edges: list[tuple[int, int]]) -> None:
        self.n_nodes = n
        adj: dict[int, set[int]] = {m: set() for m in range(n)}
        for a, b in edges:
            adj[a].add(b)
            adj[b].add(a)
        self._adj = {m: tuple(sorted(s)) for m, s in adj.items()}

    def neighbors(self, m: int) -> tuple[int, ...]:
        return self._adj[m]

    def degree(self, m: int) -> int:
        return len(self._adj[m])


# A star with a tail and an isolated node: degrees 0 .. 3, places that differ from ranks.
GRAPH = Graph(6, [(0, 1), (0, 2), (0, 3), (3, 4), (1, 4)])


def test_header_words_are_the_seqlock_counters_then_the_fields():
    assert (BEGIN, END) == (0, 1)
    assert (LAYER, VERSION, NELEMS, ROWS, COLS) == (2, 3, 4, 5, 6)
    assert HEADER_WORDS == 7 and HEADER_FIELDS == 5
    assert len(EMPTY_HEADER) == HEADER_WORDS and EMPTY_HEADER[LAYER] == -1
    assert write_bytes(12) == (7 + 12) * 8
    # The compiled seqlock uses the same words.
    assert (seqlock._BEGIN, seqlock._END, seqlock._LAYER) == (BEGIN, END, LAYER)
    assert (seqlock._HEAD, seqlock._WORDS) == (HEADER_FIELDS, HEADER_WORDS)


def test_slots_and_finished_words_tile_the_window_without_overlap():
    for me in range(GRAPH.n_nodes):
        lay = SlotLayout.of(GRAPH, me, max_elems=10)
        owner = np.full(lay.window_words, -1)
        for i in range(lay.degree):
            for parity in (0, 1):
                start = lay.slot_start(i, parity)
                assert lay.in_slot_starts(parity)[i] == start
                assert (owner[start : start + lay.slot_words] == -1).all()
                owner[start : start + lay.slot_words] = 2 * i + parity
        fin = lay.finished_start
        assert (owner[fin : fin + lay.degree] == -1).all()
        assert fin + lay.degree == lay.window_words or lay.degree == 0
        assert (owner[:fin] >= 0).all()  # no gap
    assert SlotLayout.of(GRAPH, 5, 10).window_words == 1  # isolated: one word, never used


def test_each_write_lands_in_the_slot_its_neighbour_reads():
    # What me computes for its slot in n's window equals what n computes for me's in-slot,
    # and likewise for the finished words.
    layouts = [SlotLayout.of(GRAPH, m, 8) for m in range(GRAPH.n_nodes)]
    for me, lay in enumerate(layouts):
        for i, n in enumerate(lay.neighbors):
            theirs = layouts[n]
            k = theirs.index_of(me)
            for parity in (0, 1):
                assert lay.out_slot_start(i, parity) == theirs.in_slot_starts(parity)[k]
            assert lay.out_finished_word(i) == theirs.finished_start + k


def test_index_of_and_asymmetric_graphs_are_rejected():
    lay = SlotLayout.of(GRAPH, 0, 4)
    assert lay.neighbors == (1, 2, 3) and lay.index_of(3) == 2
    with pytest.raises(ValueError, match="rank 4 is not a neighbour of rank 0"):
        lay.index_of(4)

    class OneWay(Graph):
        def neighbors(self, m: int) -> tuple[int, ...]:
            return (1,) if m == 0 else ()

    with pytest.raises(ValueError, match="not symmetric"):
        SlotLayout.of(OneWay(2, []), 0, 4)


def test_initialise_and_field_indices():
    lay = SlotLayout.of(GRAPH, 0, 3)
    words = np.full(lay.window_words, 99, dtype=np.int64)
    lay.initialise(words)
    for i in range(lay.degree):
        for parity in (0, 1):
            start = lay.slot_start(i, parity)
            assert tuple(words[start : start + HEADER_WORDS]) == EMPTY_HEADER
            assert (words[start + HEADER_WORDS : start + lay.slot_words] == 99).all()  # data
    assert (words[lay.finished_start :] == -1).all()

    starts = np.array([lay.slot_start(0, 1), lay.slot_start(2, 0)], dtype=np.intp)
    begin, head, data, end = field_indices(starts)
    assert begin.tolist() == (starts + BEGIN).tolist() and end.tolist() == (starts + END).tolist()
    assert head.tolist() == [list(range(s + LAYER, s + HEADER_WORDS)) for s in starts]
    assert data.tolist() == (starts + HEADER_WORDS).tolist()
