"""Hop distances of a graph: one node's eccentricity and the diameter, cheap at M = 4,096.

The diameter is the largest eccentricity (a node's longest shortest path). What is done:

- a *circulant* graph (circular, ring, complete, exponential: node ``m``'s neighbours are
  ``m + s (mod M)`` for the same offsets at every node) looks the same from every node, so
  one breadth-first search from node 0 gives it (:func:`eccentricity`): ``O(M d)``;
- any other graph (random-regular, an edge-list file) is searched from every node at once
  (:func:`all_sources_diameter`): each source's reached set is a bit row, and one step ORs
  every node's neighbours' rows (``d M^2 / 64`` word operations a step, as many steps as the
  diameter; a random 8-regular graph on 4,096 nodes, diameter 6: about 0.1 s). Where the
  diameter is long (a BFS from node 0 is deeper than :data:`BITSET_MAX_DEPTH`, e.g. a long
  path in a file) one breadth-first search from each node costs less, and is what runs.

Both are exact. A disconnected graph has no finite diameter: ``ValueError``.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

__all__ = ["BITSET_MAX_DEPTH", "SOURCES_PER_PASS", "all_sources_diameter", "eccentricity"]

#: Above this depth of the BFS from node 0 the diameter is taken by one BFS per node.
BITSET_MAX_DEPTH = 256

#: Sources searched together (bit columns of one pass: ``M * SOURCES_PER_PASS / 8`` bytes).
SOURCES_PER_PASS = 4096


def eccentricity(adjacency: csr_matrix, source: int = 0) -> int:
    """Hops from ``source`` to the farthest node (breadth-first).

    Parameters
    ----------
    adjacency : scipy.sparse.csr_matrix, shape (M, M)
        The graph's symmetric 0/1 adjacency (edges listed one way suffice).
    source : int
        The node searched from.

    Returns
    -------
    int
        The eccentricity of ``source``.

    Raises
    ------
    ValueError
        Some node is unreachable from ``source``.
    """
    dist = shortest_path(adjacency, directed=False, unweighted=True, indices=source)
    if not np.all(np.isfinite(dist)):
        raise ValueError("the graph is disconnected: its diameter is infinite")
    return int(dist.max())


def all_sources_diameter(adjacency: csr_matrix, table: np.ndarray) -> int:
    """The exact diameter of any connected graph, searched from every node.

    Parameters
    ----------
    adjacency : scipy.sparse.csr_matrix, shape (M, M)
        The graph's adjacency (for the per-node searches of a deep graph).
    table : ndarray of int, shape (M, D)
        Each node's neighbours, padded with ``M``.

    Returns
    -------
    int
        The largest eccentricity.

    Raises
    ------
    ValueError
        The graph is disconnected.
    """
    M = table.shape[0]
    if eccentricity(adjacency, 0) > BITSET_MAX_DEPTH:
        return _per_source_diameter(adjacency)
    return max(_bitset_depth(table, np.arange(start, min(start + SOURCES_PER_PASS, M)))
               for start in range(0, M, SOURCES_PER_PASS))


def _bitset_depth(table: np.ndarray, sources: np.ndarray) -> int:
    """Steps until every node is reached from each of ``sources`` (their largest
    eccentricity): row v of ``reach`` holds one bit per source, set once v is reached."""
    M = table.shape[0]
    width = len(sources)
    words = (width + 63) // 64
    reach = np.zeros((M + 1, words), dtype=np.uint64)  # row M: the padding's empty row
    col = np.arange(width)
    reach[sources, col // 64] = np.left_shift(np.uint64(1), (col % 64).astype(np.uint64))
    full = np.full(words, np.iinfo(np.uint64).max, dtype=np.uint64)
    if width % 64:
        full[-1] = np.uint64((1 << (width % 64)) - 1)
    steps = 0
    while not (reach[:M] == full).all():
        new = reach[:M].copy()
        for k in range(table.shape[1]):
            new |= reach[table[:, k]]
        if np.array_equal(new, reach[:M]):
            raise ValueError("the graph is disconnected: its diameter is infinite")
        reach[:M] = new
        steps += 1
    return steps


def _per_source_diameter(adjacency: csr_matrix) -> int:
    """One breadth-first search per node, a block of sources at a time (memory)."""
    M = adjacency.shape[0]
    best = 0
    for start in range(0, M, 256):
        dist = shortest_path(adjacency, directed=False, unweighted=True,
                             indices=np.arange(start, min(start + 256, M)))
        if not np.all(np.isfinite(dist)):
            raise ValueError("the graph is disconnected: its diameter is infinite")
        best = max(best, int(dist.max()))
    return best
