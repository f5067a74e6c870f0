"""Tests for dssfn_mpi.graph.topology: graph construction, spectra, mixing and validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dssfn_mpi.errors import UserError
from dssfn_mpi.graph.topology import TOPOLOGIES, Graph, make_topology, read_edge_list


def _is_connected(g: Graph) -> bool:
    seen = {0}
    frontier = [0]
    while frontier:
        node = frontier.pop()
        for nb in g.neighbors(node):
            if nb not in seen:
                seen.add(nb)
                frontier.append(nb)
    return len(seen) == g.n_nodes


def _check_simple_undirected(g: Graph) -> None:
    assert all(0 <= i < j < g.n_nodes for i, j in g.edges)
    assert list(g.edges) == sorted(set(g.edges))
    for m in range(g.n_nodes):
        nbrs = g.neighbors(m)
        assert m not in nbrs
        assert list(nbrs) == sorted(set(nbrs))
        for n in nbrs:
            assert m in g.neighbors(n)
    assert int(g.degrees.sum()) == 2 * len(g.edges)


def _circulant_lambda2(M: int, offsets: list[int]) -> float:
    # Laplacian eigenvalues of a circulant graph with symmetric offset set S:
    # lambda_k = sum_{s in S} (1 - cos(2 pi k s / M)).
    return min(sum(1 - math.cos(2 * math.pi * k * s / M) for s in offsets) for k in range(1, M))


# -- circular -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("M", "d", "node", "expected"),
    [
        (8, 2, 0, (1, 7)),
        (8, 4, 0, (1, 2, 6, 7)),
        (8, 4, 3, (1, 2, 4, 5)),
        (8, 3, 0, (1, 4, 7)),
        (8, 3, 5, (1, 4, 6)),
        (10, 5, 0, (1, 2, 5, 8, 9)),
        (10, 5, 7, (2, 5, 6, 8, 9)),
        (2, 1, 0, (1,)),
        (2, 1, 1, (0,)),
    ],
)
def test_circular_exact_neighbours(M: int, d: int, node: int, expected: tuple) -> None:
    g = make_topology("circular", M, d)
    assert g.neighbors(node) == expected
    assert g.name == f"circular(d={d})"


@pytest.mark.parametrize(
    ("M", "d"), [(2, 1), (3, 2), (5, 4), (8, 3), (8, 7), (9, 4), (10, 5), (20, 8), (20, 19)]
)
def test_circular_regular_simple_connected(M: int, d: int) -> None:
    g = make_topology("circular", M, d)
    _check_simple_undirected(g)
    assert g.is_regular
    assert g.min_degree == g.max_degree == d
    assert all(g.degree(m) == d for m in range(M))
    assert len(g.edges) == M * d // 2
    assert _is_connected(g)


@pytest.mark.parametrize("M", [2, 4, 7, 10])
def test_circular_with_max_degree_is_complete(M: int) -> None:
    assert make_topology("circular", M, M - 1).edges == make_topology("complete", M).edges


def test_circular_default_degree() -> None:
    assert make_topology("circular", 6).is_regular
    assert make_topology("circular", 6).max_degree == 2
    assert make_topology("circular", 2).edges == ((0, 1),)


def test_ring_and_complete() -> None:
    ring = make_topology("ring", 7)
    assert ring.name == "ring"
    assert ring.edges == make_topology("circular", 7, 2).edges
    assert make_topology("ring", 2).edges == ((0, 1),)
    assert make_topology("ring", 5, degree=2).edges == make_topology("circular", 5, 2).edges
    comp = make_topology("complete", 6)
    assert len(comp.edges) == 15
    assert comp.min_degree == 5
    assert make_topology("complete", 6, degree=5).edges == comp.edges


@pytest.mark.parametrize("name", [t for t in TOPOLOGIES if t != "file"])
def test_single_node_is_trivial(name: str) -> None:
    g = make_topology(name, 1)
    assert g.n_nodes == 1
    assert g.edges == ()
    assert g.neighbors(0) == ()
    assert g.degree(0) == 0
    assert g.diameter == 0
    assert g.algebraic_connectivity == 0.0
    np.testing.assert_array_equal(g.metropolis_weights(), [[1.0]])
    assert g.mixing_rounds() == 1


# -- diameter and spectrum -------------------------------------------------------
@pytest.mark.parametrize("M", [2, 3, 4, 5, 8, 11, 20])
def test_ring_closed_forms(M: int) -> None:
    g = make_topology("ring", M)
    assert g.diameter == M // 2
    # M = 2: the single edge has Laplacian eigenvalues 0 and 2.
    expected = 2.0 if M == 2 else 2 - 2 * math.cos(2 * math.pi / M)
    assert g.algebraic_connectivity == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("M", [2, 3, 6, 13])
def test_complete_closed_forms(M: int) -> None:
    g = make_topology("complete", M)
    assert g.diameter == 1
    assert g.algebraic_connectivity == pytest.approx(M, abs=1e-10)


@pytest.mark.parametrize(("M", "d"), [(8, 3), (10, 4), (10, 5), (20, 8), (21, 6), (20, 19)])
def test_circular_spectrum_and_diameter_closed_forms(M: int, d: int) -> None:
    g = make_topology("circular", M, d)
    offsets = [s for k in range(1, d // 2 + 1) for s in (k, -k)]
    if d % 2:
        offsets.append(M // 2)
    assert g.algebraic_connectivity == pytest.approx(_circulant_lambda2(M, offsets), abs=1e-9)
    if d % 2 == 0:
        # Each hop covers at most d/2 positions around the circle.
        assert g.diameter == math.ceil((M // 2) / (d // 2))
    else:
        # Brute force from node 0 (vertex-transitive, so its eccentricity is the diameter).
        dist = {0: 0}
        frontier = [0]
        while frontier:
            nxt = []
            for u in frontier:
                for v in g.neighbors(u):
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        nxt.append(v)
            frontier = nxt
        assert g.diameter == max(dist.values())


def test_describe_fields() -> None:
    desc = make_topology("circular", 20, 8).describe()
    assert desc["name"] == "circular(d=8)"
    assert desc["n_nodes"] == 20
    assert desc["n_edges"] == 80
    assert desc["min_degree"] == desc["max_degree"] == 8
    assert desc["diameter"] == 3
    assert desc["algebraic_connectivity"] > 0
    assert set(desc) == {
        "name",
        "n_nodes",
        "n_edges",
        "min_degree",
        "max_degree",
        "diameter",
        "spectral_gap",
        "algebraic_connectivity",
    }


# -- mixing ---------------------------------------------------------------------------
def _irregular_graph(tmp_path) -> Graph:
    path = tmp_path / "star_plus.txt"
    path.write_text("0 1\n0 2\n0 3\n0 4\n4 5\n5 6\n")
    return read_edge_list(path)


@pytest.mark.parametrize("kind", ["ring", "circular", "complete", "random-regular", "irregular"])
def test_metropolis_doubly_stochastic_symmetric(kind: str, tmp_path) -> None:
    if kind == "irregular":
        g = _irregular_graph(tmp_path)
    elif kind == "circular":
        g = make_topology("circular", 12, 5)
    elif kind == "random-regular":
        g = make_topology("random-regular", 14, 3, seed=4)
    else:
        g = make_topology(kind, 9)
    w = g.metropolis_weights()
    M = g.n_nodes
    assert w.shape == (M, M)
    np.testing.assert_allclose(w, w.T, atol=0)
    np.testing.assert_allclose(w.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    assert (w >= 0).all()
    assert (np.diag(w) > 0).all()
    adj = g.adjacency_matrix()
    for i in range(M):
        for j in range(M):
            if i != j and adj[i, j] == 0:
                assert w[i, j] == 0
            elif i != j:
                assert w[i, j] == pytest.approx(1 / (1 + max(g.degree(i), g.degree(j))))
    # Repeated mixing reaches the average.
    x = np.arange(M, dtype=float)
    for _ in range(g.mixing_rounds(tol=1e-8)):
        x = w @ x
    np.testing.assert_allclose(x, (M - 1) / 2, atol=1e-6 * M)


def test_mixing_rounds_shrink_disagreement_by_tol() -> None:
    g = make_topology("circular", 16, 4)
    w = g.metropolis_weights()
    tol = 1e-4
    r = g.mixing_rounds(tol=tol)
    rho = g.mixing_rate()
    assert 0 < rho < 1
    assert rho**r <= tol < rho ** (r - 1)
    # The worst-case vector (the slowest eigenvector) is actually reduced that much.
    vals, vecs = np.linalg.eigh(w - 1.0 / 16)
    v = vecs[:, np.argmax(np.abs(vals))]
    x = v.copy()
    for _ in range(r):
        x = w @ x
    assert np.linalg.norm(x) <= tol * np.linalg.norm(v) * (1 + 1e-9)


def test_mixing_rounds_decrease_with_degree_at_m20() -> None:
    rounds = [
        make_topology("circular", 20, d).mixing_rounds() for d in (2, 4, 6, 8, 10, 12, 16, 18)
    ]
    assert all(a > b for a, b in zip(rounds, rounds[1:])), rounds
    assert make_topology("circular", 20, 19).mixing_rounds() == 1
    assert make_topology("complete", 20).mixing_rounds() == 1
    assert rounds[-1] > 1


def test_mixing_rounds_cap_and_tol() -> None:
    g = make_topology("ring", 40)
    assert g.mixing_rounds(cap=7) == 7
    assert g.mixing_rounds(tol=1e-2) < g.mixing_rounds(tol=1e-8)
    for bad in (0.0, 1.0, -1.0, 2.0):
        with pytest.raises(UserError, match="mixing tolerance must be between 0 and 1"):
            g.mixing_rounds(tol=bad)
    with pytest.raises(UserError, match="cap must be at least 1"):
        g.mixing_rounds(cap=0)


def test_mixing_rounds_are_the_spectral_gaps_beyond_ten_thousand() -> None:
    g = make_topology("ring", 400)  # rho = 1 - 1.6e-4: about 56,000 rounds to 1e-4
    r, rho = g.mixing_rounds(tol=1e-4), g.mixing_rate()
    assert r > 10000
    assert rho**r <= 1e-4 < rho ** (r - 1)
    split = Graph(4, ((0, 1), (2, 3)), "two edges")
    with pytest.raises(ValueError, match="disconnected"):
        split.mixing_rounds()


# -- random-regular ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("M", "d"), [(2, 1), (6, 2), (10, 3), (12, 4), (9, 4), (16, 5), (30, 2), (8, 7)]
)
def test_random_regular_degrees_connected(M: int, d: int) -> None:
    for seed in range(3):
        g = make_topology("random-regular", M, d, seed=seed)
        _check_simple_undirected(g)
        assert (g.degrees == d).all()
        assert _is_connected(g)
        assert g.algebraic_connectivity > 1e-9


def test_random_regular_deterministic_and_seed_dependent() -> None:
    a = make_topology("random-regular", 20, 4, seed=7)
    b = make_topology("random-regular", 20, 4, seed=7)
    assert a == b
    assert a.name == "random-regular(d=4,seed=7)"
    others = {make_topology("random-regular", 20, 4, seed=s).edges for s in range(8)}
    assert len(others) == 8
    # Not just the circular graph relabelled away: switches really moved edges.
    assert a.edges != make_topology("circular", 20, 4).edges
    rings = {make_topology("random-regular", 12, 2, seed=s).edges for s in range(5)}
    assert len(rings) == 5


def test_random_regular_default_degree() -> None:
    assert (make_topology("random-regular", 10).degrees == 2).all()


def test_random_regular_odd_product() -> None:
    with pytest.raises(UserError, match=r"n_nodes\*degree even \(got 7\*3=21\)"):
        make_topology("random-regular", 7, 3)


# -- edge-list files ---------------------------------------------------------------------
def test_read_edge_list_comments_blank_lines(tmp_path) -> None:
    path = tmp_path / "g.txt"
    path.write_text(
        "# a square with a diagonal\n\n0 1\n  1   2  # inline\n3 2\n\t0 3\n2 0\n# end\n"
    )
    g = read_edge_list(path)
    assert g.n_nodes == 4
    assert g.edges == ((0, 1), (0, 2), (0, 3), (1, 2), (2, 3))
    assert g.name == "file(g.txt)"
    assert g.neighbors(2) == (0, 1, 3)
    assert read_edge_list(str(path), n_nodes=4) == g


def test_file_round_trip_via_make_topology(tmp_path) -> None:
    ref = make_topology("circular", 10, 4)
    path = tmp_path / "circ.txt"
    path.write_text("".join(f"{j} {i}\n" for i, j in ref.edges))
    g = make_topology("file", 10, path=str(path))
    assert g.edges == ref.edges
    assert g.algebraic_connectivity == pytest.approx(ref.algebraic_connectivity)


def test_single_node_file(tmp_path) -> None:
    path = tmp_path / "one.txt"
    path.write_text("# nothing\n")
    g = read_edge_list(path, n_nodes=1)
    assert g.n_nodes == 1 and g.edges == ()
    with pytest.raises(UserError, match="has no edges"):
        read_edge_list(path)
    with pytest.raises(UserError, match="has no edges"):
        read_edge_list(path, n_nodes=3)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("0 1\n1 2\n2 2\n", r"g\.txt line 3: self-loop 2 2"),
        ("0 1\n# c\n1 2\n2 1\n", r"g\.txt line 4: duplicate edge 2 1 \(already on line 3\)"),
        ("0 1\n1 2\n0 1\n", r"g\.txt line 3: duplicate edge 0 1 \(already on line 1\)"),
        ("0 1\n\n1 x\n", r"g\.txt line 3: expected two integer node ids 'i j', got '1 x'"),
        ("0 1\n1 2 3\n", r"g\.txt line 2: expected two integer node ids"),
        ("0 1\n2\n", r"g\.txt line 2: expected two integer node ids"),
        ("0 1\n1 2.0\n", r"g\.txt line 2: expected two integer node ids"),
        ("0 1\n1 -2\n", r"g\.txt line 2: node id -2 is negative"),
        ("0 1\n2 3\n", r"node 2 is unreachable from node 0 \(2 components\)"),
        ("0 1\n1 2\n4 5\n", r"node 3 is unreachable from node 0 \(3 components\)"),
    ],
)
def test_read_edge_list_errors(tmp_path, text: str, pattern: str) -> None:
    path = tmp_path / "g.txt"
    path.write_text(text)
    with pytest.raises(UserError, match=pattern):
        read_edge_list(path)


def test_read_edge_list_n_nodes(tmp_path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("0 1\n1 2\n2 3\n")
    with pytest.raises(
        UserError, match=r"line 3: node id 3 is out of range for 3 nodes \(ids are 0..2\)"
    ):
        read_edge_list(path, n_nodes=3)
    # An extra node that no edge mentions is isolated.
    with pytest.raises(UserError, match=r"node 4 is unreachable from node 0 \(2 components\)"):
        read_edge_list(path, n_nodes=5)
    assert read_edge_list(path, n_nodes=4).n_nodes == 4


def test_read_edge_list_missing_file(tmp_path) -> None:
    with pytest.raises(UserError, match="not found"):
        read_edge_list(tmp_path / "nope.txt")
    with pytest.raises(UserError, match="cannot read edge-list file"):
        read_edge_list(tmp_path)
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00\x80")
    with pytest.raises(UserError, match="not UTF-8 text"):
        read_edge_list(binary)


# -- validation messages --------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (
            dict(name="torus", n_nodes=4),
            r"unknown topology 'torus': choose one of "
            r"circular, ring, complete, random-regular, exponential, file$",
        ),
        (dict(name="circular", n_nodes=0), r"at least 1 node, got 0"),
        (dict(name="complete", n_nodes=-3), r"at least 1 node, got -3"),
        (dict(name="circular", n_nodes=2.5), r"number of nodes must be an integer"),
        (
            dict(name="circular", n_nodes=8, degree=8),
            r"degree 8 is out of range for circular on 8 nodes: use 2\.\.7",
        ),
        (
            dict(name="circular", n_nodes=8, degree=0),
            r"degree 0 is out of range for circular on 8 nodes: use 2\.\.7",
        ),
        (
            dict(name="circular", n_nodes=8, degree=1),
            r"degree 1 is out of range for circular on 8 nodes: use 2\.\.7",
        ),
        (
            dict(name="circular", n_nodes=2, degree=2),
            r"degree 2 is out of range for circular on 2 nodes: use 1$",
        ),
        (
            dict(name="circular", n_nodes=1, degree=1),
            r"degree 1 is out of range for circular on 1 node: use 0",
        ),
        (dict(name="circular", n_nodes=8, degree=2.0), r"degree must be an integer"),
        (
            dict(name="circular", n_nodes=7, degree=3),
            r"circular graph with odd degree d=3 needs an even number of nodes \(got M=7\); "
            r"use an even d or an even node count$",
        ),
        (
            dict(name="random-regular", n_nodes=6, degree=6),
            r"degree 6 is out of range for random-regular on 6 nodes: use 2\.\.5",
        ),
        (
            dict(name="random-regular", n_nodes=6, degree=2, seed=-1),
            r"seed must be a non-negative integer",
        ),
        (dict(name="ring", n_nodes=8, degree=4), r"a ring on 8 nodes has degree 2, not 4"),
        (
            dict(name="complete", n_nodes=8, degree=4),
            r"a complete graph on 8 nodes has degree 7, not 4",
        ),
        (dict(name="file", n_nodes=4), r"topology 'file' needs an edge-list file"),
        (dict(name="circular", n_nodes=4, path="g.txt"), r"path only applies to topology 'file'"),
    ],
)
def test_make_topology_validation(kwargs: dict, pattern: str) -> None:
    with pytest.raises(UserError, match=pattern) as info:
        make_topology(**kwargs)
    assert "\n" not in str(info.value)


def test_file_topology_refuses_degree(tmp_path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("0 1\n")
    with pytest.raises(UserError, match="degree does not apply to topology 'file'"):
        make_topology("file", 2, degree=1, path=str(path))


def test_graph_invariants_are_enforced() -> None:
    with pytest.raises(ValueError):
        Graph(3, ((1, 0),), "bad")
    with pytest.raises(ValueError):
        Graph(3, ((0, 3),), "bad")
    with pytest.raises(ValueError):
        Graph(3, ((1, 2), (0, 1)), "bad")
    with pytest.raises(ValueError):
        Graph(0, (), "bad")
    g = make_topology("ring", 5)
    with pytest.raises(IndexError):
        g.neighbors(5)
    with pytest.raises(ValueError):
        g.degrees[0] = 7  # read-only, so the cached value cannot be corrupted
    # A hand-built disconnected graph: the library refuses a diameter, reports rho = 1.
    split = Graph(4, ((0, 1), (2, 3)), "two edges")
    with pytest.raises(ValueError, match="disconnected"):
        _ = split.diameter
    assert split.algebraic_connectivity == pytest.approx(0.0, abs=1e-12)
    assert split.mixing_rounds(cap=50) == 50
