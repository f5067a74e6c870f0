"""The communication graph over the M processing nodes.

The paper runs every experiment on a *circular* graph: node ``m`` is linked to
``m +- 1, ..., m +- d/2 (mod M)``, so every node has ``d`` neighbours; ``d = 2``
is the ring and ``d = 1`` with ``M = 2`` the single edge of its figure 3. This
module builds that graph and a few others (complete, seeded random-regular,
exponential, or an edge-list file; the families' edges are
:mod:`dssfn_mpi.graph.families`), checks that the result is connected, and answers the
questions the engines and the benchmarks ask of it: neighbours, diameter
(:mod:`dssfn_mpi.graph.distance`), algebraic connectivity, a Metropolis-Hastings mixing
matrix, its spectral gap and how many gossip rounds it needs to reach consensus
(:mod:`dssfn_mpi.graph.spectrum`). Every one of these is cheap at M = 4,096.

Node ids are 0-based and equal MPI ranks. All graphs are undirected and simple
(no self-loops, no repeated edges) and must be connected. The one exception to
"every node has a neighbour" is the trivial graph of a single node
(``n_nodes == 1``), which every topology accepts: it has no edges, degree 0,
diameter 0, and its algebraic connectivity is reported as 0.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix, diags

from ..errors import UserError, require
from ..fmt import MISSING, number, setting
from . import families
from .distance import all_sources_diameter, eccentricity
from .spectrum import DENSE_MAX_NODES, algebraic_connectivity, contraction_factor

TOPOLOGIES = ("circular", "ring", "complete", "random-regular", "exponential", "file")


@dataclass(frozen=True)
class Graph:
    """An undirected simple graph on nodes ``0 .. n_nodes-1``.

    Parameters
    ----------
    n_nodes : int
        Number of nodes M (MPI ranks), at least 1.
    edges : tuple of (int, int)
        Each undirected edge once as ``(i, j)`` with ``i < j``, sorted.
    name : str
        Human-readable description, e.g. ``"circular(d=8)"``.

    Notes
    -----
    The constructor checks the edge invariants (a broken one is a bug and
    raises ``ValueError``) but not connectivity: :func:`make_topology` and
    :func:`read_edge_list` check that and report it as a :class:`UserError`.
    """

    n_nodes: int
    edges: tuple[tuple[int, int], ...]
    name: str

    def __post_init__(self) -> None:
        n = int(self.n_nodes)
        if n < 1:
            raise ValueError(f"Graph needs at least one node, got n_nodes={self.n_nodes}")
        edges = tuple((int(i), int(j)) for i, j in self.edges)
        for i, j in edges:
            if not 0 <= i < j < n:
                raise ValueError(f"edge ({i}, {j}) is not (i, j) with 0 <= i < j < {n}")
        if any(a >= b for a, b in zip(edges, edges[1:])):
            raise ValueError("edges must be sorted and listed once")
        # Normalise to plain ints so equality and hashing do not depend on numpy types.
        object.__setattr__(self, "n_nodes", n)
        object.__setattr__(self, "edges", edges)

    # -- adjacency ---------------------------------------------------------
    @cached_property
    def _adjacency(self) -> tuple[tuple[int, ...], ...]:
        nbrs: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for i, j in self.edges:
            nbrs[i].append(j)
            nbrs[j].append(i)
        return tuple(tuple(sorted(a)) for a in nbrs)

    def _check_node(self, m: int) -> int:
        if not 0 <= int(m) < self.n_nodes:
            raise IndexError(f"node {m} is not in 0..{self.n_nodes - 1}")
        return int(m)

    def neighbors(self, m: int) -> tuple[int, ...]:
        """Return the neighbours of node ``m``, sorted ascending.

        Parameters
        ----------
        m : int
            Node id in ``0 .. n_nodes-1``.

        Returns
        -------
        tuple of int
            The ids of the nodes sharing an edge with ``m``.
        """
        return self._adjacency[self._check_node(m)]

    def degree(self, m: int) -> int:
        """Return the number of neighbours of node ``m``.

        Parameters
        ----------
        m : int
            Node id in ``0 .. n_nodes-1``.

        Returns
        -------
        int
            ``len(self.neighbors(m))``.
        """
        return len(self.neighbors(m))

    @cached_property
    def degrees(self) -> np.ndarray:
        """Degree of every node as a read-only int64 array of length M."""
        deg = np.array([len(a) for a in self._adjacency], dtype=np.int64)
        deg.setflags(write=False)
        return deg

    @property
    def n_edges(self) -> int:
        """Number of undirected edges."""
        return len(self.edges)

    @property
    def max_degree(self) -> int:
        """Largest node degree (0 for the single-node graph)."""
        return int(self.degrees.max())

    @property
    def min_degree(self) -> int:
        """Smallest node degree (0 for the single-node graph)."""
        return int(self.degrees.min())

    @property
    def is_regular(self) -> bool:
        """True when every node has the same degree."""
        return self.min_degree == self.max_degree

    # -- spectra and distances --------------------------------------------
    def adjacency_matrix(self) -> np.ndarray:
        """Return the dense symmetric 0/1 adjacency matrix (float64, M x M).

        Returns
        -------
        numpy.ndarray
            ``A[i, j] = 1`` when ``(i, j)`` is an edge, else 0.
        """
        a = np.zeros((self.n_nodes, self.n_nodes))
        if self.edges:
            e = np.asarray(self.edges)
            a[e[:, 0], e[:, 1]] = 1.0
            a[e[:, 1], e[:, 0]] = 1.0
        return a

    def laplacian(self) -> np.ndarray:
        """Return the dense graph Laplacian ``L = D - A`` (float64, M x M).

        Returns
        -------
        numpy.ndarray
            Symmetric positive semi-definite matrix with zero row sums.
        """
        a = self.adjacency_matrix()
        return np.diag(a.sum(axis=1)) - a

    def _sparse(self) -> csr_matrix:
        """The adjacency as a sparse matrix, each edge once (upper triangle)."""
        e = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        ones = np.ones(len(e))
        return coo_matrix((ones, (e[:, 0], e[:, 1])), shape=(self.n_nodes, self.n_nodes)).tocsr()

    def _neighbor_table(self) -> np.ndarray:
        """Each node's neighbours as rows of an (M, max degree) array, padded with M."""
        table = np.full((self.n_nodes, max(self.max_degree, 1)), self.n_nodes, dtype=np.int64)
        for m, nbrs in enumerate(self._adjacency):
            table[m, :len(nbrs)] = nbrs
        return table

    @cached_property
    def is_circulant(self) -> bool:
        """True when shifting every node by one (``m -> m + 1 mod M``) maps edges to edges:
        node m's neighbours are ``m + s (mod M)`` for node 0's offsets s. Circular, ring,
        complete and exponential graphs are; the graph then looks the same from every node
        (vertex-transitive)."""
        if not self.edges:
            return True
        e = np.asarray(self.edges, dtype=np.int64)
        shifted = np.sort((e + 1) % self.n_nodes, axis=1)
        shifted = shifted[np.lexsort((shifted[:, 1], shifted[:, 0]))]
        return bool(np.array_equal(shifted, e))

    @cached_property
    def diameter(self) -> int:
        """Longest shortest-path length in hops (0 for a single node).

        Exact and cheap at M = 4,096: one breadth-first search from node 0 on a circulant
        graph (:attr:`is_circulant`: every node sees the same distances), else a search from
        every node at once (:mod:`dssfn_mpi.graph.distance`). Raises ``ValueError`` for a
        disconnected graph, whose diameter is infinite.
        """
        if self.n_nodes == 1:
            return 0
        try:
            if self.is_circulant:
                return eccentricity(self._sparse(), 0)
            return all_sources_diameter(self._sparse(), self._neighbor_table())
        except ValueError:
            raise ValueError(
                f"graph {self.name} is disconnected: its diameter is infinite") from None

    @cached_property
    def algebraic_connectivity(self) -> float:
        """Second-smallest eigenvalue of the Laplacian (Fiedler value).

        Positive exactly when the graph is connected; ``M`` for the complete
        graph, ``2 - 2 cos(2 pi / M)`` for the ring. The single-node graph has
        no second eigenvalue and reports 0. Computed once per graph
        (:func:`dssfn_mpi.graph.spectrum.algebraic_connectivity`: dense up to 1,024 nodes,
        from the sparse Laplacian beyond).
        """
        if self.n_nodes == 1:
            return 0.0
        a = self._sparse()
        return algebraic_connectivity(diags(self.degrees.astype(np.float64)) - (a + a.T))

    def _edge_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """The edges as an (E, 2) array and their Metropolis weights ``1 / (1 + max(d_i, d_j))``."""
        e = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        deg = self.degrees
        return e, 1.0 / (1.0 + np.maximum(deg[e[:, 0]], deg[e[:, 1]]))

    def metropolis_weights(self, sparse: bool = False) -> np.ndarray | csr_matrix:
        """Return the Metropolis-Hastings mixing matrix W (M x M).

        ``W[i, j] = 1 / (1 + max(d_i, d_j))`` on every edge, 0 between
        non-neighbours, and ``W[i, i] = 1 - sum_{j != i} W[i, j]``.

        Parameters
        ----------
        sparse : bool
            Return a scipy CSR matrix instead of a dense array (no M x M copy).

        Returns
        -------
        numpy.ndarray or scipy.sparse.csr_matrix
            Symmetric and doubly stochastic, with a positive diagonal (each row's
            off-diagonal sum is at most ``d_i / (1 + d_i)``), so on a connected
            graph ``x <- W x`` converges to the average.
        """
        e, vals = self._edge_weights()
        M = self.n_nodes
        if sparse:
            off = coo_matrix((np.concatenate([vals, vals]),
                              (np.concatenate([e[:, 0], e[:, 1]]),
                               np.concatenate([e[:, 1], e[:, 0]]))), shape=(M, M)).tocsr()
            diag = 1.0 - np.asarray(off.sum(axis=1)).ravel()
            return (off + coo_matrix((diag, (np.arange(M), np.arange(M))), shape=(M, M))).tocsr()
        w = np.zeros((M, M))
        w[e[:, 0], e[:, 1]] = vals
        w[e[:, 1], e[:, 0]] = vals
        w[np.diag_indices(M)] = 1.0 - w.sum(axis=1)
        return w

    @cached_property
    def _mixing_rate(self) -> float:
        # The dense W where the dense spectrum is taken; beyond, no M x M copy.
        return contraction_factor(self.metropolis_weights(sparse=self.n_nodes > DENSE_MAX_NODES))

    def mixing_rate(self) -> float:
        """Return rho, the consensus contraction factor of the Metropolis matrix.

        Returns
        -------
        float
            ``rho = ||W - 11^T / M||_2``: the largest ``|eigenvalue|`` of W once
            the consensus eigenvalue 1 is removed. 0 for the complete graph,
            below 1 for any connected graph, 1 for a disconnected one. Computed
            once per graph (:func:`dssfn_mpi.graph.spectrum.contraction_factor`).
        """
        return self._mixing_rate

    def mixing_rounds(self, tol: float = 1e-6, cap: int | None = None) -> int:
        """Return how many rounds of ``x <- W x`` shrink the disagreement by ``tol``.

        Parameters
        ----------
        tol : float
            Wanted reduction factor of ``||x - mean(x)||``, in (0, 1).
        cap : int, optional
            Upper bound on the answer (returned for a disconnected graph). None: the
            rounds the spectral gap asks for, however many (a disconnected graph is
            refused).

        Returns
        -------
        int
            ``ceil(log(tol) / log(rho))`` with ``rho`` from :meth:`mixing_rate`,
            clipped to ``1 .. cap``; 1 when ``rho`` is 0 (complete graph, and the
            single-node graph). W is the Metropolis matrix of
            :meth:`metropolis_weights`.

        Raises
        ------
        ValueError
            A disconnected graph without a cap (no number of rounds reaches ``tol``).
        """
        require(
            0.0 < float(tol) < 1.0,
            f"mixing tolerance must be between 0 and 1 (exclusive), got {tol}",
        )
        require(cap is None or int(cap) >= 1, f"mixing round cap must be at least 1, got {cap}")
        rho = self.mixing_rate()
        if rho <= 1e-12:
            return 1
        if rho >= 1.0 - 1e-12:
            if cap is None:
                raise ValueError(f"graph {self.name} is disconnected: mixing never agrees")
            return int(cap)
        # Subtract a hair so an exact ratio such as 2.0000000001 does not round up to 3.
        rounds = max(math.ceil(math.log(tol) / math.log(rho) - 1e-9), 1)
        return int(rounds if cap is None else min(rounds, cap))

    @property
    def spectral_gap(self) -> float:
        """``1 - rho``, rho the consensus contraction factor of :meth:`mixing_rate`: 1 for the
        complete graph (and a single node), 0 for a disconnected one; the rounds to a
        tolerance ``tol`` grow as ``log(1 / tol) / gap`` when it is small."""
        return 1.0 - self.mixing_rate()

    def facts(self) -> dict:
        """The graph's facts as the run log's root attributes record them.

        Returns
        -------
        dict
            ``degree`` (the largest), ``graph_min_degree``, ``graph_diameter``,
            ``graph_spectral_gap`` and ``graph_algebraic_connectivity``
            (docs/RUNLOG.md).
        """
        return {
            "degree": self.max_degree,
            "graph_min_degree": self.min_degree,
            "graph_diameter": int(self.diameter),
            "graph_spectral_gap": float(self.spectral_gap),
            "graph_algebraic_connectivity": float(self.algebraic_connectivity),
        }

    def describe(self) -> dict:
        """Return a JSON-friendly summary of the graph.

        Returns
        -------
        dict
            Keys ``name``, ``n_nodes``, ``n_edges``, ``min_degree``,
            ``max_degree``, ``diameter``, ``spectral_gap``,
            ``algebraic_connectivity``.
        """
        return {
            "name": self.name,
            "n_nodes": self.n_nodes,
            "n_edges": self.n_edges,
            "min_degree": self.min_degree,
            "max_degree": self.max_degree,
            "diameter": self.diameter,
            "spectral_gap": self.spectral_gap,
            "algebraic_connectivity": self.algebraic_connectivity,
        }


def facts_line(attrs: dict) -> str:
    """The graph's facts in one line, from the run log's root attributes.

    Parameters
    ----------
    attrs : dict
        ``topology``, ``degree``, ``graph_min_degree``, ``graph_diameter`` and
        ``graph_spectral_gap`` (:meth:`Graph.facts`); a missing one (an older run log)
        prints ``-``.

    Returns
    -------
    str
        E.g. ``"exponential: degree 5, diameter 2, spectral gap 0.5"``; an irregular
        graph's degree reads ``min-max``.
    """
    low, high = attrs.get("graph_min_degree"), attrs.get("degree")
    degree = setting(high)
    if setting(low) != MISSING and low != high:
        degree = f"{low}-{degree}"
    return (f"{setting(attrs.get('topology'))}: degree {degree}, "
            f"diameter {setting(attrs.get('graph_diameter'))}, "
            f"spectral gap {number(attrs.get('graph_spectral_gap'), '.4g')}")


# -- construction ------------------------------------------------------------------
def _as_int(value, what: str) -> int:
    """Accept Python and numpy integers (not bools, not floats) as an int."""
    require(
        isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)),
        f"{what} must be an integer, got {value!r}",
    )
    return int(value)


def make_topology(
    name: str,
    n_nodes: int,
    degree: int | None = None,
    seed: int = 0,
    path: str | None = None,
) -> Graph:
    """Build a connected communication graph over ``n_nodes`` nodes.

    Parameters
    ----------
    name : str
        One of :data:`TOPOLOGIES`:

        ``circular``
            The paper's graph: node m is linked to ``m +- 1 .. m +- d/2 (mod M)``.
            An odd d needs an even M and adds the opposite node ``m + M/2``,
            so d = 1 with M = 2 is a single edge and d = M - 1 is complete.
            Valid degrees: 2..M-1 (1 only for M = 2). Default 2 (1 when M = 2).
        ``ring``
            ``circular`` with d = 2 (d = 1 when M = 2).
        ``complete``
            Every pair of nodes linked (d = M - 1).
        ``random-regular``
            A seeded random connected d-regular graph; needs ``M * d`` even.
            Same degree range and default as ``circular``.
        ``exponential``
            Node i linked to ``i +- 2^k (mod M)`` for ``k = 0 .. ceil(log2 M) - 1``
            (:func:`dssfn_mpi.graph.families.exponential_offsets`): regular, diameter
            about ``log2 M``; its degree follows from M (``2 log2 M - 1`` for M a power
            of two).
        ``file``
            Edges read from ``path`` by :func:`read_edge_list`.
    n_nodes : int
        Number of nodes M (the MPI world size), at least 1. With M = 1 every
        topology gives the trivial graph: one node, no edges, degree 0.
    degree : int or None
        Node degree d for ``circular`` and ``random-regular``. For ``ring``,
        ``complete`` and ``exponential`` it may be given only if it equals their
        fixed degree; it must be omitted for ``file``.
    seed : int
        Seed of ``random-regular`` (ignored by the others). Same seed, same graph.
    path : str or None
        Edge-list file; required for ``file`` and refused for the others.

    Returns
    -------
    Graph
        The connected graph.

    Raises
    ------
    UserError
        Unknown name, bad node count, degree out of range (or other than a fixed
        one), odd degree with odd M, ``M * d`` odd for ``random-regular``, missing or
        unexpected path, or a disconnected graph (a file, or no connected
        random-regular draw).
    """
    key = str(name).strip().lower()
    require(
        key in TOPOLOGIES,
        f"unknown topology {name!r}: choose one of {', '.join(TOPOLOGIES)}",
    )
    n = _as_int(n_nodes, "number of nodes")
    require(n >= 1, f"a topology needs at least 1 node, got {n}; run with at least one rank")
    if key == "file":
        require(
            path is not None,
            "topology 'file' needs an edge-list file: give its path (one 'i j' edge per line)",
        )
        require(
            degree is None,
            "degree does not apply to topology 'file' (the file fixes it); drop the degree",
        )
        return read_edge_list(path, n_nodes=n)
    require(
        path is None,
        f"an edge-list path only applies to topology 'file', not {key!r}; "
        "drop the path or use topology 'file'",
    )
    d = None if degree is None else _as_int(degree, "degree")
    if key in _FIXED_DEGREE:
        return _fixed_degree_graph(key, n, d)
    if d is None:
        d = families.default_degree(n)
    if key == "circular":
        return Graph(n, families.circular_edges(n, d), f"circular(d={d})")
    seed = _as_int(seed, "seed")
    require(seed >= 0, f"seed must be a non-negative integer, got {seed}")
    return Graph(n, *families.random_regular_edges(n, d, seed))


#: The topologies whose degree follows from M, as their refusal of another degree names them.
_FIXED_DEGREE = {"complete": "a complete graph", "ring": "a ring",
                 "exponential": "an exponential graph"}


def _fixed_degree_graph(key: str, n: int, d: int | None) -> Graph:
    """The complete graph, the ring or the exponential graph on ``n`` nodes; a degree ``d``
    other than theirs is a user error."""
    fixed = {"complete": n - 1, "ring": families.default_degree(n),
             "exponential": len(families.exponential_offsets(n))}[key]
    require(
        d is None or d == fixed,
        f"{_FIXED_DEGREE[key]} on {n} nodes has degree {fixed}, not {d}; "
        "drop the degree or use topology 'circular'",
    )
    if key == "complete":
        edges = tuple((i, j) for i in range(n) for j in range(i + 1, n))
    elif key == "ring":
        edges = families.circular_edges(n, fixed)
    else:
        edges = families.exponential_edges(n)
    return Graph(n, edges, key)


def read_edge_list(path: str | os.PathLike, n_nodes: int | None = None) -> Graph:
    """Read an undirected graph from an edge-list text file.

    The format is one edge ``i j`` per line with 0-based node ids separated by
    whitespace. ``#`` starts a comment (whole line or after an edge) and blank
    lines are ignored. Each edge is listed once, in either orientation.

    Parameters
    ----------
    path : str or os.PathLike
        The file to read.
    n_nodes : int or None
        Expected number of nodes. When given, every id must be below it and
        every node must appear (an absent node is isolated, hence the graph is
        disconnected). When None the node count is the largest id + 1. A
        single-node graph (no edges) is only possible with ``n_nodes=1``.

    Returns
    -------
    Graph
        The connected graph, named ``file(<basename>)``.

    Raises
    ------
    UserError
        Missing or unreadable file, malformed line, negative or out-of-range
        id, self-loop or duplicate edge (each with its line number), no edges,
        or a disconnected graph.
    """
    src = os.fspath(path)
    label = os.path.basename(src) or src
    if n_nodes is not None:
        n_nodes = _as_int(n_nodes, "number of nodes")
        require(n_nodes >= 1, f"a topology needs at least 1 node, got {n_nodes}")
    try:
        with open(src, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise UserError(f"edge-list file {src!r} not found; check the path") from None
    except UnicodeDecodeError:
        raise UserError(
            f"edge-list file {src!r} is not UTF-8 text; give a text file of 'i j' lines"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read edge-list file {src!r}: {exc.strerror}") from None

    first_line: dict[tuple[int, int], int] = {}
    for lineno, raw in enumerate(lines, start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        where = f"{label} line {lineno}"
        tokens = text.split()
        try:
            if len(tokens) != 2:
                raise ValueError
            i, j = int(tokens[0]), int(tokens[1])
        except ValueError:
            raise UserError(f"{where}: expected two integer node ids 'i j', got {text!r}") from None
        for v in (i, j):
            require(v >= 0, f"{where}: node id {v} is negative; node ids are 0-based")
            if n_nodes is not None:
                require(
                    v < n_nodes,
                    f"{where}: node id {v} is out of range for {n_nodes} nodes "
                    f"(ids are 0..{n_nodes - 1}); fix the id or run with more ranks",
                )
        require(i != j, f"{where}: self-loop {i} {j}; remove it")
        key = (min(i, j), max(i, j))
        require(
            key not in first_line,
            f"{where}: duplicate edge {i} {j} (already on line {first_line.get(key)}); "
            "remove one of them",
        )
        first_line[key] = lineno

    if not first_line:
        if n_nodes == 1:
            return Graph(1, (), f"file({label})")
        raise UserError(
            f"edge-list file {src!r} has no edges; add one 'i j' line per edge "
            "(a single node needs n_nodes=1)"
        )
    n = n_nodes if n_nodes is not None else 1 + max(j for _, j in first_line)
    edges = tuple(sorted(first_line))
    families.require_connected(n, edges, f"graph file({label}) on {n} nodes")
    return Graph(n, edges, f"file({label})")
