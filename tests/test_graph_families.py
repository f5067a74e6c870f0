"""The exponential graph, the random-regular graph's refusals, and the graph's facts (degree,
diameter, spectral gap) against constructions and computations made here independently."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from dssfn_mpi.errors import UserError
from dssfn_mpi.graph import distance, families
from dssfn_mpi.graph.topology import Graph, facts_line, make_topology, read_edge_list


def _direct_exponential(M: int) -> list[set[int]]:
    """Node i's neighbours: i +- 2^k mod M for k = 0 .. ceil(log2 M) - 1, without i."""
    K = math.ceil(math.log2(M)) if M > 1 else 0
    return [{(i + sign * 2**k) % M for k in range(K) for sign in (1, -1)} - {i}
            for i in range(M)]


def _all_pairs_diameter(graph: Graph) -> int:
    dist = shortest_path(csr_matrix(graph.adjacency_matrix()), unweighted=True)
    return int(dist.max())


def _dense_gap(graph: Graph) -> float:
    """1 - the largest |eigenvalue| of the Metropolis matrix besides its 1, built here."""
    A = graph.adjacency_matrix()
    deg = A.sum(axis=1)
    W = A / (1 + np.maximum.outer(deg, deg))
    W += np.diag(1 - W.sum(axis=1))
    lam = np.linalg.eigvalsh(W)  # ascending: the last is the consensus 1
    return 1 - float(np.abs(lam[:-1]).max(initial=0.0))


# -- the exponential graph -------------------------------------------------------------------
@pytest.mark.parametrize("M", [1, 2, 3, 8, 12, 16])
def test_exponential_neighbours_are_the_powers_of_two(M):
    g = make_topology("exponential", M)
    expected = _direct_exponential(M)
    assert [set(g.neighbors(i)) for i in range(M)] == expected
    assert g.name == "exponential" and g.is_regular and g.is_circulant
    assert g.max_degree == len(expected[0])
    if M >= 2 and M & (M - 1) == 0:  # a power of two: +M/2 and -M/2 are one neighbour
        assert g.max_degree == 2 * int(math.log2(M)) - 1
    assert {1: (), 2: ((0, 1),)}.get(M, g.edges) == g.edges  # M = 1 trivial, M = 2 one edge


@pytest.mark.parametrize("M", [1, 2, 3, 5, 8, 12, 16, 24, 33, 64])
def test_exponential_diameter_and_gap(M):
    g = make_topology("exponential", M)
    assert g.diameter == (0 if M == 1 else _all_pairs_diameter(g))
    assert g.diameter <= math.ceil(math.log2(M))
    assert g.spectral_gap == pytest.approx(_dense_gap(g), abs=1e-12)
    assert g.spectral_gap == pytest.approx(1 - g.mixing_rate(), abs=0)


def test_exponential_refuses_another_degree():
    assert make_topology("exponential", 8, degree=5).edges == make_topology("exponential", 8).edges
    with pytest.raises(UserError, match=r"^an exponential graph on 8 nodes has degree 5, not 4; "
                       r"drop the degree or use topology 'circular'$"):
        make_topology("exponential", 8, degree=4)
    with pytest.raises(UserError, match="path only applies to topology 'file'"):
        make_topology("exponential", 8, path="g.txt")


# -- random-regular: every impossible setting is one line ----------------------------------
@pytest.mark.parametrize(("M", "d", "fragment"), [
    (7, 3, r"n_nodes\*degree even \(got 7\*3=21\)"),
    (6, 6, r"degree 6 is out of range for random-regular on 6 nodes: use 2\.\.5"),
    (6, 9, r"degree 9 is out of range"),
])
def test_random_regular_impossible_settings(M, d, fragment):
    with pytest.raises(UserError, match=fragment) as info:
        make_topology("random-regular", M, d)
    assert "\n" not in str(info.value)


def test_random_regular_without_a_connected_draw_is_a_user_error(monkeypatch):
    two_triangles = ((0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5))
    monkeypatch.setattr(families, "_draw_regular", lambda n, d, rng: two_triangles)
    with pytest.raises(UserError, match=r"^no connected random-regular\(d=2,seed=3\) graph on "
                       r"6 nodes in 200 draws; use a larger degree or another --seed$"):
        make_topology("random-regular", 6, 2, seed=3)


# -- diameters: one BFS on a circulant graph, from every node otherwise -------------------------
def _irregular(tmp_path) -> Graph:
    path = tmp_path / "g.txt"
    path.write_text("0 1\n0 2\n0 3\n0 4\n4 5\n5 6\n6 7\n7 8\n2 8\n")
    return read_edge_list(path)


@pytest.mark.parametrize("kind", ["random-regular", "irregular", "path"])
@pytest.mark.parametrize("per_pass,max_depth", [(4096, 256), (5, 256), (64, 0)])
def test_diameter_from_every_node(kind, per_pass, max_depth, tmp_path, monkeypatch):
    monkeypatch.setattr(distance, "SOURCES_PER_PASS", per_pass)  # several passes, partial words
    monkeypatch.setattr(distance, "BITSET_MAX_DEPTH", max_depth)  # 0: one BFS per node
    g = {"random-regular": lambda: make_topology("random-regular", 70, 3, seed=1),
         "irregular": lambda: _irregular(tmp_path),
         "path": lambda: Graph(67, tuple((i, i + 1) for i in range(66)), "path")}[kind]()
    assert not g.is_circulant
    assert g.diameter == _all_pairs_diameter(g)


@pytest.mark.parametrize("name,d", [("circular", 6), ("ring", None), ("complete", None),
                                    ("exponential", None)])
def test_circulant_graphs_take_one_search(name, d, monkeypatch):
    g = make_topology(name, 40, d)
    assert g.is_circulant
    monkeypatch.setattr("dssfn_mpi.graph.topology.all_sources_diameter", None)  # not called
    assert g.diameter == _all_pairs_diameter(g)


def test_a_disconnected_graph_has_no_diameter():
    for g in (Graph(6, ((0, 1), (1, 2), (3, 4), (4, 5)), "two paths"),
              Graph(6, ((0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5)), "two triangles")):
        with pytest.raises(ValueError, match="disconnected"):
            _ = g.diameter


def test_facts_and_their_line(tmp_path):
    g = make_topology("exponential", 8)
    facts = g.facts()
    assert facts == {"degree": 5, "graph_min_degree": 5, "graph_diameter": 2,
                     "graph_spectral_gap": pytest.approx(2 / 3),
                     "graph_algebraic_connectivity": pytest.approx(g.algebraic_connectivity)}
    assert facts_line({"topology": "exponential", **facts}) == (
        "exponential: degree 5, diameter 2, spectral gap 0.6667")
    star = _irregular(tmp_path)
    assert facts_line({"topology": star.name, **star.facts()}).startswith(
        f"file(g.txt): degree 1-4, diameter {star.diameter}, spectral gap 0.")
    assert facts_line({"topology": "ring", "degree": 2}) == (
        "ring: degree 2, diameter -, spectral gap -")  # a run log from before the facts
