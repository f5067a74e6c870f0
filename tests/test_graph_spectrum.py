"""Tests for dssfn_mpi.graph.spectrum: the contraction factor of the Metropolis matrix."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from dssfn_mpi.graph import spectrum, topology
from dssfn_mpi.graph.topology import Graph, make_topology


def _two_rings(n: int) -> Graph:
    """Two rings of ``n`` nodes each, not joined: a disconnected graph on 2n nodes."""
    ring = make_topology("ring", n).edges
    return Graph(2 * n, tuple(sorted(ring + tuple((i + n, j + n) for i, j in ring))), "two rings")


def _dense_rho(graph: Graph) -> float:
    """rho by the definition: the dense spectrum of ``W - 11^T / M``."""
    M = graph.n_nodes
    return float(np.max(np.abs(np.linalg.eigvalsh(graph.metropolis_weights() - 1.0 / M))))


def _circulant_rho(graph: Graph, half: int) -> float:
    """rho of a circular graph's circulant W in extended precision: its eigenvalues are
    ``W_00 + 2 sum_k W_0k cos(2 pi k j / M)`` over the offsets k = 1..half, j = 1..M-1."""
    W, M, L = graph.metropolis_weights(), graph.n_nodes, np.longdouble
    j = np.arange(1, M, dtype=L)
    lam = L(W[0, 0]) + sum(2 * L(W[0, k]) * np.cos(2 * L(np.pi) * k * j / M)
                           for k in range(1, half + 1))
    return float(np.max(np.abs(lam)))


def _refuse_dense(*_args, **_kwargs):
    raise AssertionError("the dense spectrum was taken")


@pytest.mark.parametrize("graph", [
    make_topology("ring", 40), make_topology("circular", 90, 8), make_topology("complete", 13),
    make_topology("random-regular", 64, 4, seed=1), _two_rings(12)],
    ids=["ring", "circular8", "complete", "random-regular", "disconnected"])
def test_band_form_gives_the_dense_contraction_factor(graph, monkeypatch):
    expected = _dense_rho(graph)
    monkeypatch.setattr(spectrum, "DENSE_MAX_NODES", 0)
    monkeypatch.setattr(spectrum, "BAND_RATIO", 1)
    monkeypatch.setattr(spectrum, "circulant_row", lambda W: None)  # the band, not Fourier
    monkeypatch.setattr(spectrum.np.linalg, "eigvalsh", _refuse_dense)
    assert graph.mixing_rate() == pytest.approx(expected, abs=1e-12)
    if graph.name == "two rings":
        assert graph.mixing_rate() == pytest.approx(1.0, abs=1e-12)
    if graph.name == "complete":
        assert graph.mixing_rate() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("topology_name,M,degree", [("ring", 4096, None), ("circular", 2048, 8)])
def test_large_circular_graphs_take_a_cheap_form_exactly(topology_name, M, degree, monkeypatch):
    graph = make_topology(topology_name, M, degree)
    monkeypatch.setattr(spectrum.np.linalg, "eigvalsh", _refuse_dense)
    rho = graph.mixing_rate()
    assert rho == pytest.approx(_circulant_rho(graph, (degree or 2) // 2), abs=1e-12)
    assert 1 - rho > 1e-7


def test_large_disconnected_graph_has_rate_one(monkeypatch):
    graph = _two_rings(1100)
    monkeypatch.setattr(spectrum.np.linalg, "eigvalsh", _refuse_dense)
    assert graph.mixing_rate() == pytest.approx(1.0, abs=1e-12)
    assert graph.mixing_rounds(cap=9) == 9


def test_a_wide_band_keeps_the_dense_spectrum():
    # A random 8-regular graph has no narrow ordering: its band would cost more than dense.
    W = make_topology("random-regular", 1100, 8, seed=0).metropolis_weights()
    assert spectrum._band_form(W) is None


def test_the_rate_is_computed_once_per_graph(monkeypatch):
    calls = []

    def counting(W):
        calls.append(len(W))
        return spectrum.contraction_factor(W)

    monkeypatch.setattr(topology, "contraction_factor", counting)
    graph = make_topology("circular", 30, 4)
    rates = {graph.mixing_rate() for _ in range(3)}
    rounds = {graph.mixing_rounds(tol) for tol in (1e-3, 1e-6, 1e-9)}
    assert calls == [30] and rates == {_dense_rho(graph)} and len(rounds) == 3


# -- the forms beyond the dense spectrum: Fourier (circulant), Lanczos; the Laplacian's ------
def _file_graph(tmp_path, text: str) -> Graph:
    path = tmp_path / "g.txt"
    path.write_text(text)
    return topology.read_edge_list(path)


def _dense_lambda2(graph: Graph) -> float:
    return float(np.linalg.eigvalsh(graph.laplacian())[1])


@pytest.mark.parametrize("graph", [
    make_topology("ring", 40), make_topology("circular", 90, 8), make_topology("complete", 13),
    make_topology("exponential", 64), make_topology("exponential", 12),
    make_topology("exponential", 2)],
    ids=["ring", "circular8", "complete", "exponential64", "exponential12", "exponential2"])
def test_fourier_form_gives_the_dense_spectrum(graph, monkeypatch):
    rho, lam2 = _dense_rho(graph), _dense_lambda2(graph)
    assert spectrum.circulant_row(graph.metropolis_weights(sparse=True)) is not None
    monkeypatch.setattr(spectrum, "DENSE_MAX_NODES", 0)
    monkeypatch.setattr(spectrum, "_band_form", _refuse_dense)
    monkeypatch.setattr(spectrum.np.linalg, "eigvalsh", _refuse_dense)
    assert graph.mixing_rate() == pytest.approx(rho, abs=1e-12)
    assert graph.algebraic_connectivity == pytest.approx(lam2, abs=1e-12)


@pytest.mark.parametrize("kind", ["random-regular", "irregular", "disconnected"])
def test_lanczos_gives_the_dense_spectrum(kind, tmp_path, monkeypatch):
    graph = {"random-regular": lambda: make_topology("random-regular", 64, 5, seed=2),
             "irregular": lambda: _file_graph(tmp_path, "0 1\n0 2\n0 3\n0 4\n4 5\n5 6\n1 6\n"),
             "disconnected": lambda: _two_rings(9)}[kind]()
    rho, lam2 = _dense_rho(graph), _dense_lambda2(graph)
    assert spectrum.circulant_row(graph.metropolis_weights(sparse=True)) is None
    monkeypatch.setattr(spectrum, "DENSE_MAX_NODES", 0)
    monkeypatch.setattr(spectrum, "BAND_RATIO", 10**9)  # no band is narrow enough
    monkeypatch.setattr(spectrum.np.linalg, "eigvalsh", _refuse_dense)
    assert graph.mixing_rate() == pytest.approx(rho, abs=1e-12)
    assert graph.algebraic_connectivity == pytest.approx(max(lam2, 0.0), abs=1e-12)


def test_sparse_metropolis_is_the_dense_one(tmp_path):
    for graph in (make_topology("exponential", 12), _file_graph(tmp_path, "0 1\n1 2\n0 3\n")):
        np.testing.assert_allclose(graph.metropolis_weights(sparse=True).toarray(),
                                   graph.metropolis_weights(), atol=1e-15)


def test_circulant_row_reads_a_shifted_first_row():
    c = np.array([0.5, 0.2, 0.0, 0.1, 0.0, 0.2])
    C = np.array([np.roll(c, i) for i in range(6)])
    np.testing.assert_array_equal(spectrum.circulant_row(scipy.sparse.csr_matrix(C)), c)
    C[3, 3], C[3, 4] = 0.4, 0.3  # one row's values differ: not circulant
    assert spectrum.circulant_row(scipy.sparse.csr_matrix(C)) is None


@pytest.mark.parametrize("M", [1100, 4096])
def test_exponential_spectrum_is_cheap_and_exact_at_scale(M, monkeypatch):
    # On M a power of two the exponential graph's gap is 2 / log2 M (Fourier form, closed
    # form checked at M = 4096); the dense spectrum is never taken.
    monkeypatch.setattr(spectrum.np.linalg, "eigvalsh", _refuse_dense)
    graph = make_topology("exponential", M)
    offsets = np.array(graph.neighbors(0))
    W00 = 1 - len(offsets) / (len(offsets) + 1)
    k = np.arange(1, M)
    lam = W00 + np.cos(2 * np.pi * np.outer(k, offsets) / M).sum(axis=1) / (len(offsets) + 1)
    assert graph.mixing_rate() == pytest.approx(np.abs(lam).max(), abs=1e-12)
    if M == 4096:
        assert graph.spectral_gap == pytest.approx(2 / 12, abs=1e-12)
