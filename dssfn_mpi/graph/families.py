"""The graph families' edges: circular, random-regular and exponential, and the checks
every graph passes.

Each builder returns the sorted edge tuple ``((i, j), ...)`` with ``i < j`` that
:class:`dssfn_mpi.graph.topology.Graph` takes; :func:`dssfn_mpi.graph.topology.make_topology`
picks the family and names the graph. An impossible setting (a degree out of range, an odd
``M * d``, a disconnected result) is a :class:`~dssfn_mpi.errors.UserError` of one line,
raised before any MPI work (every rank builds the graph from the settings alone).

The circular, ring, complete and exponential graphs are *circulant*: node ``m``'s
neighbours are ``m + s (mod M)`` for one set of offsets ``s``, the same at every node, so
the graph looks the same from every node (vertex-transitive).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..errors import UserError, require

__all__ = [
    "check_circular_degree",
    "circular_edges",
    "default_degree",
    "exponential_edges",
    "exponential_offsets",
    "normalise_edges",
    "random_regular_edges",
    "require_connected",
]

# Keeps the random-regular stream apart from other users of the same seed.
_RANDOM_REGULAR_TAG = 0x52524547
# A random d-regular graph with d >= 3 is connected with high probability and a
# random Hamiltonian cycle always is, so this many tries is never reached in
# practice; it only guards against an endless loop.
MAX_RANDOM_TRIES = 200

Edges = tuple[tuple[int, int], ...]


def normalise_edges(edges: Iterable[tuple[int, int]]) -> Edges:
    """Each undirected edge once as ``(min, max)``, sorted (repeats merged)."""
    return tuple(sorted({(min(i, j), max(i, j)) for i, j in edges}))


def require_connected(n_nodes: int, edges: Edges, what: str) -> None:
    """Raise a one-line :class:`UserError` naming an unreachable node when the graph on
    ``n_nodes`` nodes with these edges is disconnected (``what`` names the graph)."""
    if n_nodes == 1:
        return
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    adj = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n_nodes, n_nodes))
    n_comp, labels = connected_components(adj, directed=False)
    if n_comp > 1:
        unreachable = int(np.flatnonzero(labels != labels[0])[0])
        raise UserError(
            f"{what} is disconnected: node {unreachable} is unreachable from node 0 "
            f"({n_comp} components); add edges so that every node is reachable"
        )


def default_degree(n: int) -> int:
    """The circular and random-regular graphs' degree when none is given: the ring's."""
    return 0 if n == 1 else (1 if n == 2 else 2)


def check_circular_degree(n: int, d: int, topology: str) -> None:
    """Refuse a degree outside 2..M-1 (1 only for M = 2, 0 only for M = 1)."""
    if n == 1:
        require(d == 0, f"degree {d} is out of range for {topology} on 1 node: use 0 (or omit it)")
        return
    # d = 1 connects only m and m + M/2, a perfect matching: connected only for M = 2.
    lo = 1 if n == 2 else 2
    hi = n - 1
    valid = f"{lo}" if lo == hi else f"{lo}..{hi}"
    require(lo <= d <= hi, f"degree {d} is out of range for {topology} on {n} nodes: use {valid}")


def _circular_pairs(n: int, d: int) -> list[tuple[int, int]]:
    offsets = list(range(1, d // 2 + 1))
    if d % 2 == 1:
        offsets.append(n // 2)  # the diametrically opposite node
    return [(m, (m + k) % n) for m in range(n) for k in offsets]


def circular_edges(n: int, d: int) -> Edges:
    """The paper's circular graph: node m linked to ``m +- 1 .. m +- d/2 (mod M)``, and to
    ``m + M/2`` when d is odd (which needs an even M).

    Raises
    ------
    UserError
        A degree out of range, or an odd degree on an odd node count.
    """
    check_circular_degree(n, d, "circular")
    require(
        d % 2 == 0 or n % 2 == 0,
        f"circular graph with odd degree d={d} needs an even number of nodes (got M={n}); "
        "use an even d or an even node count",
    )
    edges = normalise_edges(_circular_pairs(n, d))
    require_connected(n, edges, f"circular(d={d}) on {n} nodes")
    return edges


def exponential_offsets(n: int) -> tuple[int, ...]:
    """The exponential graph's neighbour offsets on ``n`` nodes, sorted.

    Node ``i`` is linked to ``i +- 2^k (mod M)`` for ``k = 0 .. ceil(log2 M) - 1``; the
    offsets here are those residues in ``1 .. M-1``, each once (``+2^k`` and ``-2^j``
    coincide when ``2^k + 2^j = M``: for M a power of two, ``k = j = log2 M - 1``; for
    M = 12, ``+8`` and ``-4``). Their number is every node's degree: ``2 log2 M - 1`` for
    M a power of two (M >= 2).

    Parameters
    ----------
    n : int
        Number of nodes M >= 1.

    Returns
    -------
    tuple of int
        Empty for M = 1, ``(1,)`` for M = 2.
    """
    if n < 2:
        return ()
    powers = [2**k for k in range((n - 1).bit_length())]  # bit_length(M - 1) = ceil(log2 M)
    return tuple(sorted({s % n for p in powers for s in (p, -p)}))


def exponential_edges(n: int) -> Edges:
    """The exponential graph's edges (:func:`exponential_offsets`); connected for every M,
    as offset 1 alone makes the ring."""
    return normalise_edges((m, (m + s) % n) for m in range(n) for s in exponential_offsets(n))


def random_regular_edges(n: int, d: int, seed: int) -> tuple[Edges, str]:
    """A seeded random connected d-regular graph, and its name.

    Draws by :func:`_draw_regular` with the seeds ``(seed, tag, attempt)`` until one is
    connected (same seed, same graph).

    Raises
    ------
    UserError
        A degree out of range, ``M * d`` odd, or no connected draw in
        :data:`MAX_RANDOM_TRIES` attempts.
    """
    check_circular_degree(n, d, "random-regular")
    require(
        (n * d) % 2 == 0,
        f"random-regular graph needs n_nodes*degree even (got {n}*{d}={n * d}); "
        "use an even degree or an even node count",
    )
    name = f"random-regular(d={d},seed={seed})"
    for attempt in range(MAX_RANDOM_TRIES):
        rng = np.random.default_rng([seed, _RANDOM_REGULAR_TAG, attempt])
        edges = _draw_regular(n, d, rng)
        try:
            require_connected(n, edges, name)
        except UserError:
            continue  # rare for d >= 3; try the next derived seed
        return edges, name
    raise UserError(
        f"no connected {name} graph on {n} nodes in {MAX_RANDOM_TRIES} draws; "
        "use a larger degree or another --seed"
    )


def _draw_regular(n: int, d: int, rng: np.random.Generator) -> Edges:
    """Draw a d-regular simple graph: a random cycle for d = 2, else edge switches.

    For ``d >= 3`` we start from the circular graph (d-regular and simple) and
    apply degree-preserving double-edge switches ``{a,b},{c,e} -> {a,e},{c,b}``,
    rejecting any switch that would create a self-loop or a repeated edge.
    Ten attempted switches per edge mix the chain well for the sizes MPI
    runs use; connectivity is checked by the caller.
    """
    if n == 1:
        return ()
    if d == 2:
        # A random Hamiltonian cycle: every 2-regular connected graph is one.
        order = rng.permutation(n)
        return normalise_edges(zip(order.tolist(), np.roll(order, -1).tolist()))
    edges = [list(e) for e in normalise_edges(_circular_pairs(n, d))]
    n_edges = len(edges)
    present = {(i, j) for i, j in edges}
    n_tries = 10 * n_edges
    picks = rng.integers(0, n_edges, size=(n_tries, 2))
    flips = rng.integers(0, 2, size=n_tries)
    for (p, q), flip in zip(picks.tolist(), flips.tolist()):
        if p == q:
            continue
        a, b = edges[p]
        c, e = edges[q]
        if flip:
            c, e = e, c
        new1 = (min(a, e), max(a, e))
        new2 = (min(c, b), max(c, b))
        if a == e or c == b or new1 in present or new2 in present or new1 == new2:
            continue
        present.discard((min(a, b), max(a, b)))
        present.discard((min(c, e), max(c, e)))
        present.add(new1)
        present.add(new2)
        edges[p] = list(new1)
        edges[q] = list(new2)
    return tuple(sorted(present))
