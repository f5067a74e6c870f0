"""The metric forms of the ADMM steps: exact sub-steps, and the exact layer solution."""

import numpy as np
import pytest

from dssfn_mpi.algorithms.updates import (
    EdgeStep,
    MetricEdgeStep,
    consensus_dual,
    consensus_primal,
)
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.ssfn.metric import DenseInverse, Metric, gram_metric
from dssfn_mpi.ssfn.solver import LocalInverse, exact_solve


def _shards(M=4, d=12, J=120, Q=3, seed=0, skew=True):
    """Shards whose features span decades: what a scalar penalty converges slowly on."""
    rng = np.random.default_rng(seed)
    scales = np.logspace(0, -2.5, d) if skew else np.ones(d)
    Y = scales[:, None] * rng.normal(size=(d, J))
    T = np.eye(Q)[:, rng.integers(0, Q, J)]
    parts = np.array_split(np.arange(J), M)
    return Y, T, [Y[:, p] for p in parts], [T[:, p] for p in parts]


def _eps(Y, T, active):
    free = exact_solve(Y @ Y.T, T @ Y.T, 1e12).O
    return (0.25 if active else 4.0) * float(np.vdot(free, free))


def _spd(d, seed):
    A = np.random.default_rng(seed).normal(size=(d, d))
    return A @ A.T + 0.1 * np.eye(d)


def test_ball_step_meets_its_optimality_conditions():
    S, C = _spd(6, 1), np.random.default_rng(2).normal(size=(3, 6))
    metric, gamma = Metric(S), 0.7
    free = -np.linalg.solve(S, C.T).T / (2 * gamma)
    L, LS = metric.ball_step(C, gamma, 4.0 * float(np.vdot(free, free)))
    np.testing.assert_allclose(L, free, atol=1e-12)  # bound inactive: the free minimiser
    eps = 0.1 * float(np.vdot(free, free))
    L, LS = metric.ball_step(C, gamma, eps)
    np.testing.assert_allclose(LS, L @ S, atol=1e-12)
    assert np.vdot(L, L) == pytest.approx(eps, rel=1e-10)
    # C + 2 gamma L S + 2 nu L = 0 for one nu >= 0.
    g = C + 2 * gamma * L @ S
    nu = -float(np.vdot(g, L)) / (2 * float(np.vdot(L, L)))
    assert nu > 0
    np.testing.assert_allclose(g + 2 * nu * L, 0, atol=1e-10)


def test_project_meets_its_optimality_conditions():
    S, W = _spd(5, 3), np.random.default_rng(4).normal(size=(2, 5))
    metric = Metric(S)
    assert metric.project(W, 2 * float(np.vdot(W, W))) is W
    eps = 0.2 * float(np.vdot(W, W))
    Z = metric.project(W, eps)
    assert np.vdot(Z, Z) == pytest.approx(eps, rel=1e-10)
    g = (Z - W) @ S  # (Z - W) S + nu Z = 0, nu >= 0
    nu = -float(np.vdot(g, Z)) / float(np.vdot(Z, Z))
    assert nu > 0
    np.testing.assert_allclose(g + nu * Z, 0, atol=1e-10)


def test_metric_must_be_positive_definite():
    with pytest.raises(ValueError, match="positive definite"):
        Metric(np.diag([1.0, 0.0]))
    S = gram_metric(np.zeros((3, 3)), np.diag([0.0, 2.0, 4.0]))
    assert np.linalg.eigvalsh(S)[0] > 0


def test_identity_metric_step_is_the_scalar_step():
    _, T, Ys, Ts = _shards(M=3, skew=False)
    B2, gamma = 2 * Ts[0] @ Ys[0].T, np.array([0.3, 0.5])
    inv = LocalInverse(Ys[0], float(gamma.sum()))
    dense = DenseInverse(2 * Ys[0] @ Ys[0].T + gamma.sum() * np.eye(Ys[0].shape[0]))
    eps = 0.5
    scalar = EdgeStep(B2, gamma, 1.0, eps, inv, compiled=False)
    metric = MetricEdgeStep(B2, gamma, 1.0, eps, dense, [Metric(np.eye(12))] * 2)
    rng = np.random.default_rng(5)
    for _ in range(5):
        Zr = rng.normal(size=(2, *B2.shape))
        np.testing.assert_allclose(metric(Zr), scalar(Zr), atol=1e-10)
        np.testing.assert_allclose(metric.Z, scalar.Z, atol=1e-10)


def _metric_arock(Ys, Ts, eps, gamma, iters, graph):
    """Edge-form activations in a per-edge metric, round robin with fresh reads."""
    M = graph.n_nodes
    nbrs = [graph.neighbors(m) for m in range(M)]
    Gs = [y @ y.T for y in Ys]
    steps = []
    for m in range(M):
        metrics = [Metric(gram_metric(Gs[m], Gs[n])) for n in nbrs[m]]
        H = 2 * Gs[m] + gamma * sum(mt.S for mt in metrics)
        steps.append(MetricEdgeStep(2 * Ts[m] @ Ys[m].T, np.full(len(nbrs[m]), gamma), 1.0,
                                    eps, DenseInverse(H), metrics))
    Os = [None] * M
    for _ in range(iters):
        for m in range(M):
            Zr = np.stack([steps[n].Z[nbrs[n].index(m)] for n in nbrs[m]])
            Os[m] = steps[m](Zr).copy()
    return Os


def _metric_consensus(Ys, Ts, eps, rho, iters):
    S = Metric(gram_metric(*[y @ y.T for y in Ys]))
    invs = [DenseInverse(2 * y @ y.T + rho * S.S) for y in Ys]
    B2s = [2 * t @ y.T for y, t in zip(Ys, Ts)]
    Zbar = np.zeros_like(B2s[0])
    U = [np.zeros_like(Zbar) for _ in Ys]
    for _ in range(iters):
        Os = [consensus_primal(inv, b, rho, Zbar, u, S) for inv, b, u in zip(invs, B2s, U)]
        mean = sum(o + u for o, u in zip(Os, U)) / len(Os)
        for o, u in zip(Os, U):
            Zbar = consensus_dual(mean, eps, o, u, S)
    return Zbar


@pytest.mark.parametrize("active", [True, False])
def test_metric_arock_reaches_the_exact_solution(active):
    Y, T, Ys, Ts = _shards()
    eps = _eps(Y, T, active)
    star = exact_solve(Y @ Y.T, T @ Y.T, eps)
    assert (star.lam > 0) == active
    Os = _metric_arock(Ys, Ts, eps, 1.0, 300, make_topology("ring", 4))
    for O in Os:
        assert np.linalg.norm(O - star.O) <= 1e-6 * np.linalg.norm(star.O)


@pytest.mark.parametrize("active", [True, False])
def test_metric_consensus_reaches_the_exact_solution(active):
    Y, T, Ys, Ts = _shards()
    eps = _eps(Y, T, active)
    star = exact_solve(Y @ Y.T, T @ Y.T, eps)
    Zbar = _metric_consensus(Ys, Ts, eps, 2.0, 200)
    assert np.linalg.norm(Zbar - star.O) <= 1e-6 * np.linalg.norm(star.O)
