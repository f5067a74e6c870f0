"""Where every word of a mailbox window sits: slots, headers, counters (arithmetic, no MPI).

Each rank's window (8-byte words, ``disp_unit=8``) holds, for every
in-neighbour in the order of ``graph.neighbors(me)``, two *parity* slots
(``layer % 2``) of ``HEADER_WORDS + max_elems`` words each: an int64 header
``[begin, end, layer, version, nelems, rows, cols]`` followed by the float64
data. After all slots comes one int64 "finished layer" word per in-neighbour.
Every slot and every finished word has exactly one writer: the neighbour it
belongs to, which computes where they are in *its neighbour's* window from that
neighbour's degree and its own place in that neighbour's list
(:class:`SlotLayout`). The protocol that uses these words is in
:class:`dssfn_mpi.mailbox.transport.ZMailbox`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["BEGIN", "COLS", "EMPTY_HEADER", "END", "HEADER_FIELDS", "HEADER_WORDS", "LAYER",
           "NELEMS", "ROWS", "VERSION", "WORD_BYTES", "GraphLike", "SlotLayout",
           "field_indices", "write_bytes"]

#: Words of a slot header, int64: the two seqlock counters, then layer, version, number of
#: elements, rows, cols. The float64 data follows.
HEADER_WORDS = 7
BEGIN, END, LAYER, VERSION, NELEMS, ROWS, COLS = range(HEADER_WORDS)
#: The header's fields after the counters (layer .. cols): what a write sends with its data.
HEADER_FIELDS = HEADER_WORDS - 2
#: Every entry is 8 bytes, so ``disp_unit=8`` and everything stays aligned.
WORD_BYTES = 8
#: A slot never written: both counters 0, layer -1 (no layer is -1), nothing else.
EMPTY_HEADER = (0, 0, -1, 0, 0, 0, 0)


class GraphLike(Protocol):
    """What the mailbox needs from ``dssfn_mpi.graph.topology.Graph``."""

    n_nodes: int

    def neighbors(self, m: int) -> tuple[int, ...]: ...

    def degree(self, m: int) -> int: ...


def write_bytes(size: int) -> int:
    """Bytes one write of ``size`` values moves: the header (counters included) and data."""
    return (HEADER_WORDS + size) * WORD_BYTES


def field_indices(starts: np.ndarray) -> tuple[np.ndarray, ...]:
    """The words a write to the slots starting at ``starts`` stores, as indices.

    Returns each slot's ``begin`` word, its header fields (layer .. cols; one
    row per slot), its first data word and its ``end`` word.
    """
    return (starts + BEGIN, (starts + LAYER)[:, None] + np.arange(HEADER_FIELDS),
            starts + HEADER_WORDS, starts + END)


@dataclass(frozen=True)
class SlotLayout:
    """The word positions of one rank's mailbox: its own window's and its slots in its
    neighbours' windows.

    Parameters
    ----------
    me : int
        This rank.
    neighbors : tuple of int
        This rank's neighbours, sorted (its in-neighbours and out-neighbours alike).
    max_elems : int
        Largest number of values a slot holds (the same on every rank).
    place_at_neighbor : tuple of int
        ``place_at_neighbor[i]``: this rank's index in the neighbour list of
        ``neighbors[i]``, which is where its slots sit in that neighbour's window.
    neighbor_degree : tuple of int
        ``neighbor_degree[i]``: the degree of ``neighbors[i]``, which places the
        finished words in that neighbour's window.
    """

    me: int
    neighbors: tuple[int, ...]
    max_elems: int
    place_at_neighbor: tuple[int, ...]
    neighbor_degree: tuple[int, ...]

    @classmethod
    def of(cls, graph: GraphLike, me: int, max_elems: int) -> SlotLayout:
        """The layout of rank ``me`` on ``graph``; ValueError if the graph is not symmetric."""
        neighbors = tuple(graph.neighbors(me))
        places, degrees = [], []
        for n in neighbors:
            theirs = tuple(graph.neighbors(n))
            if me not in theirs:
                raise ValueError(f"graph is not symmetric: {n} is a neighbour of {me} but not back")
            places.append(theirs.index(me))
            degrees.append(len(theirs))
        return cls(me, neighbors, int(max_elems), tuple(places), tuple(degrees))

    @property
    def degree(self) -> int:
        """Number of neighbours (of slots per parity in this rank's window)."""
        return len(self.neighbors)

    @property
    def slot_words(self) -> int:
        """Words of one slot: the header and room for ``max_elems`` values."""
        return HEADER_WORDS + self.max_elems

    def slot_start(self, index: int, parity: int) -> int:
        """First word of the slot of sender ``index`` (its place in the window owner's
        neighbour list) and ``parity``, in any window."""
        return (2 * index + parity) * self.slot_words

    @property
    def finished_start(self) -> int:
        """First of this rank's finished words (one per in-neighbour) in its window."""
        return 2 * self.degree * self.slot_words

    @property
    def window_words(self) -> int:
        """Words of this rank's window (at least one: MPI wants a size > 0 on some ranks)."""
        return max(self.finished_start + self.degree, 1)

    def index_of(self, n: int) -> int:
        """Place of neighbour ``n`` in this rank's list (its in-slot); ValueError if none."""
        try:
            return self.neighbors.index(n)
        except ValueError:
            raise ValueError(f"rank {n} is not a neighbour of rank {self.me}") from None

    def in_slot_starts(self, parity: int) -> list[int]:
        """First word of every in-neighbour's slot of ``parity`` in this rank's window."""
        return [self.slot_start(i, parity) for i in range(self.degree)]

    def out_slot_start(self, i: int, parity: int) -> int:
        """First word of this rank's slot of ``parity`` in neighbour ``i``'s window."""
        return self.slot_start(self.place_at_neighbor[i], parity)

    def out_finished_word(self, i: int) -> int:
        """This rank's finished word in neighbour ``i``'s window."""
        return 2 * self.neighbor_degree[i] * self.slot_words + self.place_at_neighbor[i]

    def initialise(self, words: np.ndarray) -> None:
        """Write the empty state into this rank's window ``words`` (int64): every header
        :data:`EMPTY_HEADER`, every finished word -1."""
        for i in range(self.degree):
            for parity in (0, 1):
                start = self.slot_start(i, parity)
                words[start : start + HEADER_WORDS] = EMPTY_HEADER
        words[self.finished_start : self.finished_start + self.degree] = -1
