"""Tests for dssfn_mpi.graph.spectrum: the contraction factor of the Metropolis matrix."""

from __future__ import annotations

import numpy as np
import pytest

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
    monkeypatch.setattr(spectrum.np.linalg, "eigvalsh", _refuse_dense)
    assert graph.mixing_rate() == pytest.approx(expected, abs=1e-12)
    if graph.name == "two rings":
        assert graph.mixing_rate() == pytest.approx(1.0, abs=1e-12)
    if graph.name == "complete":
        assert graph.mixing_rate() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("topology_name,M,degree", [("ring", 4096, None), ("circular", 2048, 8)])
def test_large_circular_graphs_take_the_band_form_exactly(topology_name, M, degree, monkeypatch):
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
