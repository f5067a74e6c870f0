"""The simulator's all-nodes-at-once arithmetic against its node-by-node reference.

The consensus layers on stacked arrays (``syncsim.STACKED``), the mixing rounds as matrix
products (``sim.mixing``), the stacked local inverses (``solver.StackedInverse``) and the
test accuracies from shared feature blocks (``sim.testset``) must give what the
node-by-node code gives (to 1e-12; the stacked consensus path bit for bit).
"""

from __future__ import annotations

import numpy as np
import pytest

from dssfn_mpi import algorithms
from dssfn_mpi.algorithms.edge import EdgeADMM
from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.config import TrainConfig
from dssfn_mpi.graph.mixing import mix_round
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.run import layerstep
from dssfn_mpi.sim import nodes, syncsim
from dssfn_mpi.sim.layerloop import SimOptions, simulate
from dssfn_mpi.sim.mixing import Mixer
from dssfn_mpi.sim.nodes import load_shards
from dssfn_mpi.sim.speed import SpeedModel
from dssfn_mpi.ssfn.metric import DenseInverse, Metric, MetricWoodbury, gram_metric
from dssfn_mpi.ssfn.solver import LocalInverse, StackedInverse


def _simulate(cfg: TrainConfig, M: int):
    speed = SpeedModel.build("const:1e-3", M, cfg.layers + 1, cfg.iters, {}, None, None, 0)
    return simulate(cfg, SimOptions(nodes=M, speed=speed, network=parse_network("shm")),
                    quiet=True)


@pytest.mark.parametrize("mode,relax", [("sync", 1.0), ("sync-graph", 1.6)])
@pytest.mark.parametrize("hidden", [60, 300])  # dense local inverses, and Woodbury's
def test_stacked_consensus_equals_node_by_node(monkeypatch, mode, relax, hidden):
    cfg = TrainConfig(dataset="digits", mode=mode, layers=2, hidden=hidden, iters=300,
                      stop="eps:1e-2", relax=relax, topology="circular", degree=4,
                      metric="identity")
    runs, calls = {}, []
    stacked_solve = syncsim._solve_stacked
    monkeypatch.setattr(syncsim, "_solve_stacked",
                        lambda *a: calls.append(1) or stacked_solve(*a))
    for stacked in (False, True):
        monkeypatch.setattr(syncsim, "STACKED", stacked)
        runs[stacked] = _simulate(cfg, 24)
    assert len(calls) == cfg.layers + 1  # every layer of the second run, none of the first
    ref, got = runs[False], runs[True]
    for A, B in zip(ref.Os, got.Os):
        for a, b in zip(A, B):
            assert np.abs(a - b).max() <= 1e-12 * np.abs(a).max()
    assert np.array_equal(ref.layers["activations"], got.layers["activations"])
    assert ref.attrs["sim_total_seconds"] == got.attrs["sim_total_seconds"]
    assert np.all(ref.layers["activations"][1:] < 300)  # ended by eps, not by the cap


def test_stacked_inverse_applies_each_nodes_inverse():
    rng = np.random.default_rng(3)
    d, Q = 40, 3
    Ys = [rng.standard_normal((d, J)) for J in (5, 5, 6, 30, 30, 5)]  # low rank and dense
    invs = [LocalInverse(Y, 1.0 + m) for m, Y in enumerate(Ys)]
    X = rng.standard_normal((len(Ys), Q, d))
    ref = [inv.apply(x) for inv, x in zip(invs, X)]
    out = StackedInverse(invs).apply(X)
    for m, inv in enumerate(invs):
        assert np.array_equal(out[m], ref[m])
        assert np.array_equal(inv.apply(X[m]), ref[m])  # still its own inverse


@pytest.mark.parametrize("rounds", [1, 7, 60, 2500])
def test_mixer_equals_rounds_of_mix_round(rounds):
    graph = make_topology("circular", 30, degree=4, seed=0)
    W = graph.metropolis_weights()
    X = np.random.default_rng(1).standard_normal((30, 2, 5))
    ref = X.copy()
    for _ in range(rounds):
        prev = ref.copy()
        for m in range(30):
            nb = list(graph.neighbors(m))
            mix_round(ref[m], prev[nb], W[m, m], W[m, nb])
    mixer = Mixer(W, rounds)
    got = mixer.apply(X)
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()
    assert np.abs(mixer.power() @ X.reshape(30, -1) - ref.reshape(30, -1)).max() <= 1e-12


@pytest.mark.parametrize("mode", ["async", "sync-graph", "oneshot"])
def test_test_accuracies_equal_each_nodes_own_features(mode):
    M = 5
    cfg = TrainConfig(dataset="digits", mode=mode, layers=3, hidden=100, iters=15,
                      topology="ring")
    res = _simulate(cfg, M)
    shards = load_shards(cfg, M)
    hidden, _ = cfg.width_and_bound(shards.n_classes)
    for m in range(M):
        Yt = shards.Xt
        for layer in range(cfg.layers + 1):
            O_prev = res.Os[m][layer - 1] if layer else None
            Yt = layerstep.test_features(cfg, layer, hidden, O_prev, Yt)
            ref = layerstep.accuracy_fields(True, res.Os[m][layer], Yt, shards.yt, Yt, shards.yt)
            assert res.layers["test_accuracy"][layer, m] == ref["test_accuracy"]


def test_metric_woodbury_equals_the_dense_inverse():
    rng = np.random.default_rng(4)
    d, Q = 50, 3
    Ys = [rng.standard_normal((d, J)) for J in (7, 7, 12)]
    metric = Metric(gram_metric(*(Y @ Y.T for Y in Ys)))
    invs = [MetricWoodbury(Y, 2.0 + m, metric) for m, Y in enumerate(Ys)]
    X = rng.standard_normal((len(Ys), Q, d))
    for m, (Y, inv) in enumerate(zip(Ys, invs)):
        ref = DenseInverse(2.0 * Y @ Y.T + (2.0 + m) * metric.S).apply(X[m])
        assert np.abs(inv.apply(X[m]) - ref).max() <= 1e-12 * np.abs(ref).max()
    # consensus ADMM's step (B2 + rho D S) H^-1 without a product by S
    B2, D = rng.standard_normal((2, len(Ys), Q, d))
    step = [inv.apply(b + (2.0 + m) * metric.times(x))
            for m, (inv, b, x) in enumerate(zip(invs, B2, D))]
    for m, inv in enumerate(invs):
        for _ in range(2):  # B2 S^-1 formed on the first call, then kept
            got = inv.apply_shifted(B2[m], D[m])
            assert np.abs(got - step[m]).max() <= 1e-12 * np.abs(step[m]).max()
    ref = [inv.apply(x) for inv, x in zip(invs, X)]
    stacked = StackedInverse(invs)
    out = stacked.apply(X)
    shifted = stacked.apply_shifted(B2, D)
    for m in range(len(Ys)):
        assert np.abs(out[m] - ref[m]).max() <= 1e-14 * np.abs(ref[m]).max()
        assert np.abs(shifted[m] - step[m]).max() <= 1e-12 * np.abs(step[m]).max()


@pytest.mark.parametrize("mode", ["sync", "sync-graph", "async"])
def test_metric_layer_equals_the_dense_form(monkeypatch, mode):
    """The Gram metric layer in Woodbury's local inverses (sync: one shared metric, on
    stacked arrays; sync-graph: each node's mixed metric as its eigendecomposition), and
    async's edge metrics formed once per edge as their eigendecompositions, give the dense
    per-node form's iterates (digits, 30 samples per node < d / 2)."""
    cfg = TrainConfig(dataset="digits", mode=mode, layers=1, hidden=100,
                      iters=100 if mode == "async" else 200,
                      stop="iters" if mode == "async" else "eps:1e-3", topology="circular",
                      degree=4, metric="gram")
    ref = None
    for dense in (True, False):
        if dense:  # the dense form: every node's own G, (2 G + rho S)^-1, node by node
            monkeypatch.setattr(syncsim, "STACKED", False)
            monkeypatch.setattr(algorithms.base, "needs_gram", lambda Y, metrics=0: True)
            monkeypatch.setattr(nodes, "needs_gram", lambda Y, metrics=0: True)
            monkeypatch.setattr(Metric, "compact", lambda self: self)
            monkeypatch.setattr(EdgeADMM, "metric_per_edge", False)
        else:
            monkeypatch.undo()
        got = _simulate(cfg, 40)
        ref = ref or got
    assert mode == "async" or 1 < got.layers["activations"][0, 0] < 200  # ended by eps
    for A, B in zip(ref.Os, got.Os):
        for a, b in zip(A, B):
            assert np.abs(a - b).max() <= 1e-10 * np.abs(a).max()
    assert np.array_equal(ref.layers["activations"], got.layers["activations"])


def _rounds_of_sparse(W: np.ndarray, X: np.ndarray, rounds: int) -> np.ndarray:
    out = X.reshape(len(W), -1)
    for _ in range(rounds):
        out = W @ out
    return out.reshape(X.shape)


@pytest.mark.parametrize("topology,M,degree", [("ring", 64, 2), ("circular", 90, 6)])
def test_mixer_spectral_form_equals_the_rounds(topology, M, degree):
    graph = make_topology(topology, M, degree=degree, seed=0)
    rounds = graph.mixing_rounds(1e-10 / M)
    W = graph.metropolis_weights()
    X = np.random.default_rng(2).standard_normal((M, 3, 4)) + 5.0
    mixer = Mixer(W, rounds)
    assert mixer.way(12) == "spectral" and 0 < mixer.spectrum()[0].shape[1] < M // 4
    ref = _rounds_of_sparse(W, X, rounds)
    assert np.abs(mixer.apply(X) - ref).max() <= 1e-12 * np.abs(ref).max()
    blocks = np.concatenate([rows for _, rows in mixer.blocks(X.reshape(M, -1), block=16)])
    assert np.abs(blocks - ref.reshape(M, -1)).max() <= 1e-12 * np.abs(ref).max()


def test_mixer_without_a_spectral_form_keeps_each_component_apart():
    # Two rings, not connected: the spectral form (the network mean plus decaying terms)
    # does not apply; each component mixes to its own mean.
    ring = make_topology("ring", 12).metropolis_weights()
    W = np.zeros((24, 24))
    W[:12, :12] = W[12:, 12:] = ring
    X = np.random.default_rng(3).standard_normal((24, 5))
    mixer = Mixer(W, 4000)
    assert mixer.spectrum() is None and mixer.way(5) != "spectral"
    got = mixer.apply(X)
    assert np.allclose(got[:12], X[:12].mean(axis=0), atol=1e-10)
    assert np.allclose(got[12:], X[12:].mean(axis=0), atol=1e-10)


def test_mixing_compute_is_the_live_rounds_whatever_the_simulator_runs():
    # A clock that advances 1 per reading: each timed mix_round costs exactly 1 s, so a node
    # is charged its rounds, on the ring (degree 2) and on the circular graph (degree 6) alike.
    ticks = iter(range(10**6))
    for graph in (make_topology("ring", 40), make_topology("circular", 40, degree=6)):
        mixer = Mixer(graph.metropolis_weights(), 3000)
        cost = mixer.compute_seconds((3, 4), lambda: float(next(ticks)))
        assert cost.shape == (40,) and np.all(cost == 3000.0)
        assert list(mixer.degrees) == [graph.degree(m) for m in range(40)]
