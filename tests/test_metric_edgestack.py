"""A node's metric edge step over all its edges at once (``metric.EdgeMetrics``): dense and
low-rank edges of mixed ranks on one node, stacked or one product per edge, are the
per-edge steps (``Metric.ball_step``, ``Metric.times``) to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

from dssfn_mpi.algorithms.updates import MetricEdgeStep
from dssfn_mpi.ssfn import metric as metric_mod
from dssfn_mpi.ssfn.metric import DenseInverse, LowRankMetric, Metric, metric_from_grams
from dssfn_mpi.ssfn.solver import secular_root, secular_roots

D, Q = 16, 3


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _metrics() -> list:
    """One node's five edges: dense (twice, one compacted) and low-rank of ranks 0, 4, 12."""
    rng = np.random.default_rng(0)
    scales = np.logspace(0, -1.5, D)[:, None]

    def gram(J):
        Y = scales * rng.normal(size=(D, J))
        return Y @ Y.T

    out = [metric_from_grams(gram(J), gram(J)) for J in (0, 2, 6, 16, 20)]
    assert [m.U.shape[1] for m in out[:3]] == [0, 4, 12]
    assert all(isinstance(m, LowRankMetric) for m in out[:3])
    assert all(isinstance(m, Metric) for m in out[3:])
    out[4].compact()
    return out


def _reference(B2, gamma, eta, eps, inv, metrics, Z, Zr):
    """One activation edge by edge (the per-edge steps); updates ``Z``, returns ``O``."""
    rhs = B2.copy()
    for z, zr, m, g in zip(Z, Zr, metrics, gamma):
        lam_s = m.ball_step(z + zr, g, eps)[1]
        rhs += z + 2.0 * g * lam_s
        z += eta * g * lam_s
    O = inv.apply(rhs)
    for z, m, g in zip(Z, metrics, gamma):
        z -= eta * g * m.times(O)
    return O


@pytest.fixture(params=[True, False], ids=["stacked", "per-edge"])
def stack(request, monkeypatch) -> bool:
    """Both product forms of ``EdgeMetrics``: stacked, and one product per edge."""
    if not request.param:
        monkeypatch.setattr(metric_mod, "STACK", 0)
    return request.param


def test_stacked_activations_are_the_per_edge_steps(stack):
    metrics = _metrics()
    rng = np.random.default_rng(1)
    gamma, eta = rng.uniform(0.2, 2.0, len(metrics)), 1.6
    H = 2.0 * np.diag(rng.uniform(0.5, 2.0, D)) + sum(g * m.matrix()
                                                       for g, m in zip(gamma, metrics))
    inv, B2 = DenseInverse(H), rng.normal(size=(Q, D))
    # The edges' free steps at scales over two decades: the bound cuts some, not others.
    scale = np.logspace(-1, 1, len(metrics))[:, None, None]
    Zr0 = scale * rng.normal(size=(len(metrics), Q, D))
    free = [float(np.vdot(L, L)) for L in (m.ball_step(c, g, 1e300)[0]
                                            for m, c, g in zip(metrics, Zr0, gamma))]
    eps = float(np.median(free))
    assert min(free) < eps < max(free)
    step = MetricEdgeStep(B2, gamma, eta, eps, inv, metrics)
    assert (len(step.metrics._groups) == 1) == stack
    seen = set()  # (the activation took the bounds inactive first, a bound was active)
    ball_times = step.metrics.ball_times

    def spy(C, eps, O=None):
        out = ball_times(C, eps, O)
        seen.add((O is not None, out[2] > 0))
        return out

    step.metrics.ball_times = spy
    Z = np.zeros_like(step.Z)
    for it, f in enumerate([1.0, 1e-3, 1e-3, 1e-3, 1.0, 1.0, 1e-3, 1e-3]):
        Zr = Zr0 if it == 0 else f * scale * rng.normal(size=Zr0.shape)
        O_ref = _reference(B2, gamma, eta, eps, inv, metrics, Z, Zr)
        if it % 2:
            O = step.step_rows(Zr.reshape(len(Zr), -1), np.arange(len(Zr), dtype=np.intp))
        else:
            O = step(list(Zr))
        assert _rel(O, O_ref) <= 1e-12
        for z, z_ref in zip(step.Z, Z):  # edge by edge (their scales differ)
            assert _rel(z, z_ref) <= 1e-12
    assert seen == {(True, False), (True, True), (False, False), (False, True)}


def test_stacked_ball_steps_are_the_per_edge_steps(stack):
    metrics = _metrics()
    rng = np.random.default_rng(2)
    C, gamma = rng.normal(size=(len(metrics), Q, D)), rng.uniform(0.2, 2.0, len(metrics))
    edges = metric_mod.EdgeMetrics(metrics, gamma)
    assert (len(edges._groups) == 1) == stack
    O = rng.normal(size=(Q, D))
    # Edge 2 (rank 12 of 16) nearly in its basis' span: ||C||^2 - ||C U||^2 cancels, and
    # its floor weight is formed from R where the bound may be active.
    U = metrics[2].U
    C[2] = rng.normal(size=(Q, 12)) @ U.T + 1e-3 * C[2]
    P = C[2] @ U
    assert np.vdot(C[2], C[2]) - np.vdot(P, P) < 1e-3 * np.vdot(C[2], C[2])
    for eps in (1e300, 1e-2, 1e-6):  # the bound inactive on every edge, then active
        lam_s, OB, active = edges.ball_times(C, eps, O)
        assert (active > 0) == (eps < 1e300)
        for c, g, m, ls in zip(C, gamma, metrics, lam_s):
            assert _rel(ls, m.ball_step(c, g, eps)[1]) <= 1e-12
        for OS in (edges.times(O), edges.times(O, OB)):  # O B_n formed, or from ball_times
            for os_, m in zip(OS, metrics):
                assert _rel(os_, m.times(O)) <= 1e-12


def test_secular_roots_are_the_rows_roots():
    rng = np.random.default_rng(3)
    a = 10.0 ** rng.uniform(-4, 4, (7, 9)) * (rng.random((7, 9)) < 0.8)
    den = 10.0 ** rng.uniform(-3, 3, (7, 9))
    eps = float(np.median(np.sum(a / den**2, axis=1)))
    nu = secular_roots(a, den, eps)
    assert (nu == 0).any() and (nu > 0).any()
    for row, (ai, di) in enumerate(zip(a, den)):
        assert nu[row] == secular_root(ai, di, eps)
