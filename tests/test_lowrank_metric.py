"""The Gram metric in its low-rank form (``metric.LowRankMetric``): an edge whose two nodes
hold fewer samples than the layer is wide keeps ``S = U diag(t) U^T + c I`` and lumps the
floor's directions into one term of each secular equation. Its steps, and the async and
lockstep iterates built on them, are the dense eigendecomposition's (to 1e-12)."""

from __future__ import annotations

import numpy as np
import pytest
from mpitools import run_cli

from dssfn_mpi.algorithms import edge
from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.config import TrainConfig
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.sim.layerloop import SimOptions, simulate
from dssfn_mpi.sim.speed import SpeedModel
from dssfn_mpi.ssfn import metric as metric_mod
from dssfn_mpi.ssfn.metric import LowRankMetric, Metric, gram_metric, metric_from_grams
from dssfn_mpi.ssfn.modelio import load_model


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _grams(d: int, J: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two nodes' Gram matrices of ``J`` samples each, features spanning a decade."""
    rng = np.random.default_rng(seed)
    scales = np.logspace(0, -1, d)[:, None]
    Ya, Yb = scales * rng.normal(size=(d, J)), scales * rng.normal(size=(d, J))
    return Ya @ Ya.T, Yb @ Yb.T


def test_the_form_follows_the_rank():
    Ga, Gb = _grams(24, 5, 0)
    low = metric_from_grams(Ga, Gb)
    assert isinstance(low, LowRankMetric) and low.U.shape == (24, 10)
    np.testing.assert_allclose(low.U.T @ low.U, np.eye(10), atol=1e-14)
    top = np.linalg.eigvalsh(gram_metric(Ga, Gb))[-10:]
    np.testing.assert_allclose(np.sort(low.s), top, rtol=1e-12)
    full = metric_from_grams(*_grams(24, 12, 1))  # rank 24 > 0.75 d: the dense form
    assert isinstance(full, Metric)
    assert np.array_equal(full.S, gram_metric(*_grams(24, 12, 1)))
    empty = metric_from_grams(np.zeros((4, 4)))  # a zero Gram: S = I
    assert isinstance(empty, LowRankMetric) and empty.U.shape == (4, 0)
    np.testing.assert_array_equal(empty.matrix(), np.eye(4))


@pytest.mark.parametrize("J", [0, 2, 6])
def test_low_rank_steps_are_the_dense_steps(J):
    Ga, Gb = _grams(16, J, 2)
    low, dense = metric_from_grams(Ga, Gb), Metric(gram_metric(Ga, Gb))
    assert isinstance(low, LowRankMetric) and low.U.shape[1] == 2 * J
    rng = np.random.default_rng(3)
    C, X = rng.normal(size=(3, 16)), rng.normal(size=(2, 3, 16))  # one matrix, a stack
    assert _rel(low.matrix(), dense.S) <= 1e-14
    for A in (C, X):
        assert _rel(low.times(A), dense.times(A)) <= 1e-14
        assert _rel(low.solve(A), dense.solve(A)) <= 1e-12
    free = float(np.vdot(*[dense.ball_step(C, 0.7, 1e300)[0]] * 2))
    for eps in (4.0 * free, 0.1 * free, 1e-3 * free):  # the bound inactive, then active
        (L, LS), (L_ref, LS_ref) = low.ball_step(C, 0.7, eps), dense.ball_step(C, 0.7, eps)
        assert _rel(L, L_ref) <= 1e-12 and _rel(LS, LS_ref) <= 1e-12
        assert np.vdot(L, L) <= eps * (1 + 1e-12)
    for eps in (4.0, 0.2, 1e-3):
        W = C / np.linalg.norm(C)
        assert _rel(low.project(W, eps), dense.project(W, eps)) <= 1e-12


def test_low_rank_ball_step_meets_its_optimality_conditions():
    Ga, Gb = _grams(20, 4, 4)
    low, S = metric_from_grams(Ga, Gb), gram_metric(Ga, Gb)
    C, gamma = np.random.default_rng(5).normal(size=(3, 20)), 0.4
    free = -np.linalg.solve(S, C.T).T / (2 * gamma)
    eps = 0.05 * float(np.vdot(free, free))
    L, LS = low.ball_step(C, gamma, eps)
    np.testing.assert_allclose(LS, L @ S, atol=1e-12 * np.abs(LS).max())
    assert np.vdot(L, L) == pytest.approx(eps, rel=1e-10)
    g = C + 2 * gamma * L @ S  # C + 2 gamma L S + 2 nu L = 0 for one nu > 0
    nu = -float(np.vdot(g, L)) / (2 * float(np.vdot(L, L)))
    assert nu > 0
    np.testing.assert_allclose(g + 2 * nu * L, 0, atol=1e-10 * np.abs(C).max())


def _simulate(mode: str, M: int, topology: str, degree: int, bound: float | None,
              n_train: int | None = None, iters: int = 60):
    """Layers 0 - 1 on synthetic data with 20 inputs and six samples per node."""
    cfg = TrainConfig(dataset="synthetic", dataset_options={"n_train": n_train or 6 * M},
                      mode=mode, layers=1, hidden=40, iters=iters, topology=topology,
                      degree=degree, metric="gram", norm_bound=bound)
    speed = SpeedModel.build("const:1e-3", M, cfg.layers + 1, cfg.iters, {}, None, None, 0)
    return simulate(cfg, SimOptions(nodes=M, speed=speed, network=parse_network("shm")),
                    quiet=True)


@pytest.mark.parametrize("mode,M,topology,degree", [("async", 6, "ring", 2),
                                                    ("lockstep", 8, "circular", 4)])
@pytest.mark.parametrize("bound", [None, 0.05])  # the bound at layer 0 inactive, active
def test_low_rank_iterates_are_the_dense_forms(monkeypatch, mode, M, topology, degree, bound):
    """Six samples per node and 20 inputs: every edge metric has rank 12 <= 0.75 d.

    Ridge 1e-2: the two forms differ by the rounding of the dense eigendecomposition,
    ``eps s_max / c`` (at the default 1e-3 they differ by 3e-14 - 8e-13 here)."""
    monkeypatch.setattr(metric_mod, "RIDGE", 1e-2)
    kinds: list[type] = []

    def spy(*grams):
        kinds.append(type(out := metric_from_grams(*grams)))
        return out

    monkeypatch.setattr(edge, "metric_from_grams", spy)
    low = _simulate(mode, M, topology, degree, bound)
    assert set(kinds) == {LowRankMetric}
    monkeypatch.setattr(metric_mod, "LOW_RANK", -1.0)  # the dense form on every edge
    kinds.clear()
    dense = _simulate(mode, M, topology, degree, bound)
    assert set(kinds) == {Metric}
    assert (low.layers["lambda_star"][0] > 0).all() == (bound is not None)
    for A, B in zip(dense.Os, low.Os):
        for a, b in zip(A, B):
            assert _rel(b, a) <= 1e-12
    assert np.array_equal(dense.layers["activations"], low.layers["activations"])


@pytest.mark.mpirun
@pytest.mark.timeout(300)
def test_live_lockstep_in_low_rank_metrics_is_the_simulated_run(tmp_path, monkeypatch):
    """Each rank forms its edges' metrics from the exchanged ``G`` (low-rank here: six
    samples per node), and the live iterates are the simulated ones, and the dense form's.

    At the default ridge the two forms differ by the rounding of the dense eigendecomposition
    (``eps s_max / c``) carried through the local inverse: 0.9e-12 - 1.3e-12 here, whichever
    the order of the sums in ``K`` and in the product by ``H^-1``."""
    config, model = tmp_path / "cfg.toml", tmp_path / "live-model.h5"
    config.write_text("[dataset_options]\nn_train = 24\n")
    res = run_cli(4, "train", "--mode", "lockstep", "--dataset", "synthetic", "--layers", "1",
                  "--hidden", "40", "--iters", "40", "--topology", "ring", "--metric", "gram",
                  "--norm-bound", "0.05", "--config", str(config), "--quiet",
                  "--out", str(tmp_path / "live.h5"), "--save-model", str(model),
                  timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (read_runlog(tmp_path / "live.h5").layers["lambda_star"][0] > 0).all()  # active
    live = load_model(model).nodes
    kinds: list[type] = []

    def spy(*grams):
        kinds.append(type(out := metric_from_grams(*grams)))
        return out

    monkeypatch.setattr(edge, "metric_from_grams", spy)
    low = _simulate("lockstep", 4, "ring", 2, 0.05, n_train=24, iters=40)
    assert set(kinds) == {LowRankMetric}
    monkeypatch.setattr(metric_mod, "LOW_RANK", -1.0)
    dense = _simulate("lockstep", 4, "ring", 2, 0.05, n_train=24, iters=40)
    for L, S, D in zip(live, low.Os, dense.Os):
        for a, b, c in zip(L, S, D):
            assert _rel(a, b) <= 1e-10 and _rel(b, c) <= 3e-12
