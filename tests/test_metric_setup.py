"""The metric form's set-up: each node's local matrix ``H_m = 2 G_m + sum_n gamma_mn S_mn``
summed in one product (``metric.metric_sum``), its inverse held as a packed triangle
(``metric.DenseInverse``), and the simulator's edge metrics formed from the ``G`` each node
sent (``sim.nodes``), each against the dense formula of the same quantity."""

from __future__ import annotations

import numpy as np
import pytest

from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.config import TrainConfig
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.sim.layerloop import SimOptions, _factorise, simulate
from dssfn_mpi.sim.nodes import layer_metrics, layer_problems, load_shards, penalties
from dssfn_mpi.sim.speed import SpeedModel
from dssfn_mpi.ssfn.metric import (
    DenseInverse,
    LowRankMetric,
    Metric,
    gram_metric,
    metric_from_grams,
    metric_sum,
)
from dssfn_mpi.ssfn.solver import StackedInverse, width_ratio


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _gram(rng: np.random.Generator, d: int, J: int) -> np.ndarray:
    Y = np.logspace(0, -2, d)[:, None] * rng.normal(size=(d, J))
    return Y @ Y.T


def _spd(rng: np.random.Generator, d: int) -> np.ndarray:
    A = rng.normal(size=(d, d))
    return A @ A.T + 1e-2 * d * np.eye(d)


def test_gram_metric_is_the_mean_of_its_grams():
    rng = np.random.default_rng(0)
    grams = [_gram(rng, 12, 5) for _ in range(3)]
    for n in (1, 2, 3):
        G = np.mean(np.stack(grams[:n]), axis=0)
        G = 0.5 * (G + G.T)
        G[np.diag_indices(12)] += 1e-3 * np.trace(G) / 12
        assert np.array_equal(gram_metric(*grams[:n]), G)


def test_metric_sum_is_the_weighted_sum_of_the_metrics():
    """Low-rank edges (one of rank 0), and a dense one, against ``sum_n w_n S_n`` formed
    from each edge's dense ``S`` (:func:`gram_metric`)."""
    rng = np.random.default_rng(1)
    d = 30
    own = _gram(rng, d, 4)
    others = [_gram(rng, d, 4), _gram(rng, d, 7), _gram(rng, d, 40)]
    pairs = [(own, G) for G in others] + [(np.zeros((d, d)), np.zeros((d, d)))]
    metrics = [metric_from_grams(*p) for p in pairs]
    assert [type(s) for s in metrics] == [LowRankMetric, LowRankMetric, Metric, LowRankMetric]
    assert metrics[-1].U.shape == (d, 0)
    w = np.array([0.5, 2.0, 1.5, 0.25])
    ref = sum(g * gram_metric(*p) for g, p in zip(w, pairs))
    K = metric_sum(w, metrics)
    assert np.array_equal(K, K.T)
    assert _rel(K, ref) <= 1e-13
    assert _rel(metric_sum(w[:2], metrics[:2]), ref - sum(
        g * gram_metric(*p) for g, p in zip(w[2:], pairs[2:]))) <= 1e-13
    dense = metric_sum(w[2:3], metrics[2:3])  # dense metrics alone: their matrices added
    assert np.array_equal(dense, w[2] * metrics[2].S)
    with pytest.raises(ValueError, match="weights must be >= 0"):
        metric_sum(-w, metrics)


def test_dense_inverse_holds_half_the_matrix_and_applies_the_inverse():
    rng = np.random.default_rng(2)
    d, Q = 40, 3
    H = _spd(rng, d)
    inv = DenseInverse(H)
    held = sum(v.nbytes for v in vars(inv).values() if isinstance(v, np.ndarray))
    assert held == d * (d + 1) // 2 * 8
    X = rng.normal(size=(Q, d))
    ref = np.linalg.solve(H, X.T).T
    assert _rel(inv.apply(X), ref) <= 1e-12
    out = np.empty((Q, d))
    assert inv.apply(X, out=out) is out and _rel(out, ref) <= 1e-12
    with pytest.raises(np.linalg.LinAlgError):
        DenseInverse(-H)


def test_stacked_dense_inverses_apply_each_nodes_inverse():
    rng = np.random.default_rng(3)
    d, Q = 24, 2
    Hs = [_spd(rng, d) for _ in range(4)]
    invs = [DenseInverse(H) for H in Hs]
    X = rng.normal(size=(len(Hs), Q, d))
    ref = [inv.apply(x) for inv, x in zip(invs, X)]
    assert all(StackedInverse.stackable(inv) for inv in invs)
    out = StackedInverse(invs).apply(X)
    for m, (H, inv) in enumerate(zip(Hs, invs)):
        exact = np.linalg.solve(H, X[m].T).T
        assert _rel(out[m], exact) <= 1e-12 and _rel(out[m], ref[m]) <= 1e-13
        assert np.array_equal(inv.apply(X[m]), out[m])  # its slice of the stack


def _edge_setup(mode: str, M: int, degree: int):
    """The simulator's layer-0 set-up of ``mode`` on digits: problems, penalties, edge metrics
    and local inverses, and each node's ``G`` formed independently."""
    cfg = TrainConfig(dataset="digits", mode=mode, layers=0, degree=degree, iters=1)
    graph = make_topology("circular", M, degree=degree)
    shards = load_shards(cfg, M)
    hidden, eps = cfg.width_and_bound(shards.n_classes)
    probs = layer_problems(cfg, shards, 0, hidden, eps, list(shards.X), None, None)
    pens = penalties(cfg, graph, 0, [p.stats for p in probs], 0,
                     width_ratio(probs[0].Y.shape[0], shards.sizes))
    metrics = layer_metrics(cfg, graph, probs, 0)
    grams = [X @ X.T for X in shards.X]
    return cfg, graph, probs, pens, metrics, grams


@pytest.mark.parametrize("mode", ["async", "lockstep"])
def test_edge_setup_is_the_dense_local_matrix(mode):
    """Each node keeps the packed ``G`` it sent, no matrix; its edge metrics are
    ``gram_metric(G_m, G_n)`` and its local inverse that of
    ``2 G_m + sum_n gamma_mn gram_metric(G_m, G_n)``."""
    M, d_graph = 8, 4
    cfg, graph, probs, pens, metrics, grams = _edge_setup(mode, M, d_graph)
    d = grams[0].shape[0]
    for p, G in zip(probs, grams):
        assert p.G is None and p.G_sent.shape == (d * (d + 1) // 2,)
        assert np.array_equal(p.gram(), G)
    invs, _ = _factorise(cfg.algorithm, probs, pens, metrics)
    assert all(p.G is None and p.G_sent is None for p in probs)
    X = np.random.default_rng(4).normal(size=(3, d))
    for m in range(M):
        nbrs = graph.neighbors(m)
        S = [gram_metric(grams[m], grams[n]) for n in nbrs]
        for s, ref in zip(metrics[m], S):
            assert _rel(s.matrix(), ref) <= 1e-13
        H = 2.0 * grams[m] + sum(g * s for g, s in zip(pens[m], S))
        O = invs[m].apply(X)  # O H = X: a backward error at rounding, whatever cond(H)
        assert np.abs(O @ H - X).max() <= 1e-14 * np.abs(O).max() * np.abs(H).sum(axis=0).max()
        assert _rel(O, np.linalg.solve(H, X.T).T) <= 1e-15 * np.linalg.cond(H)


def test_async_metric_run_reaches_the_exact_solution():
    """The whole metric layer on the packed inverses: every node within 1e-6 of O*."""
    M = 6
    cfg = TrainConfig(dataset="digits", mode="async", layers=0, degree=2, iters=3000,
                      stop="eps:1e-6", check=True)
    opts = SimOptions(nodes=M, network=parse_network("shm"),
                      speed=SpeedModel.build("const:1e-3", M, 1, 3000, {}, None, None, 0))
    res = simulate(cfg, opts, quiet=True)
    assert res.layers["rel_distance"][0].max() <= 1e-6
