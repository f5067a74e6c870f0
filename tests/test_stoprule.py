"""The stopping rules (--stop): parsing, and each node's own test against the formulas."""

import numpy as np
import pytest

from dssfn_mpi.engines import kernels
from dssfn_mpi.engines.updates import EdgeStep
from dssfn_mpi.errors import UserError
from dssfn_mpi.solver import LocalInverse
from dssfn_mpi.stoprule import REASONS, NodeCheck, StopRule, parse_stop, reason_code


@pytest.mark.parametrize("text, kind, tol", [("iters", "iters", None), ("eps:1e-2", "eps", 1e-2),
                                             ("local:0.001", "local", 1e-3),
                                             (" EPS:5e-3 ", "eps", 5e-3)])
def test_parse_stop(text, kind, tol):
    rule = parse_stop(text)
    assert rule.kind == kind
    assert (np.isnan(rule.tol) if tol is None else rule.tol == tol)
    assert parse_stop(str(rule)) == rule  # the canonical spelling parses back


@pytest.mark.parametrize("text, message", [
    ("eps", "choose iters, eps:E"), ("iters:3", "choose iters"), ("often", "choose iters"),
    ("eps:0", "E must be a positive number"), ("eps:nan", "E must be"),
    ("local:-1", "TOL must be a positive number"), ("local:x", "TOL must be"),
])
def test_parse_stop_refuses_with_what_to_write(text, message):
    with pytest.raises(UserError, match=message):
        parse_stop(text)


def test_reasons():
    assert REASONS == ("iters", "eps", "local", "cap")
    assert StopRule().reason(False) == reason_code("iters") == 0
    assert StopRule("eps", 1e-2).reason(True) == 1
    assert StopRule("local", 1e-3).reason(True) == 2
    assert StopRule("eps", 1e-2).reason(False) == StopRule("local", 1).reason(False) == 3


def test_eps_check_is_the_relative_distance():
    rng = np.random.default_rng(0)
    target = rng.normal(size=(3, 5))
    check = NodeCheck(StopRule("eps", 1e-2), target=target)
    near = target * (1 + 0.5e-2)
    assert check.async_done(near)
    assert check.last == pytest.approx(0.5e-2)
    far = target * 1.02
    assert not check.sync_done(far, far)
    assert check.last == pytest.approx(2e-2)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.skipif(
    not kernels.AVAILABLE, reason="numba is not installed (the `fast` extra)"))])
def test_async_local_residual_is_the_edge_gap_and_change(compiled):
    # The check carries sum_n Z_mn along instead of reading Z: compare it, activation after
    # activation, with the edge variables Lam_mn written out from the step's own Z.
    rng = np.random.default_rng(3)
    Q, d, degree, eps, eta = 2, 7, 3, 0.5, 0.8
    Y = rng.normal(size=(d, 30))
    gamma = rng.uniform(0.5, 2.0, degree)
    inv = LocalInverse(Y, float(gamma.sum()))
    B2 = rng.normal(size=(Q, d))
    step = EdgeStep(B2, gamma, eta, eps, inv, compiled=compiled)
    check = NodeCheck(StopRule("local", 1e-3), B2=B2, gamma=gamma, eta=eta)
    table = np.zeros((degree, Q * d))
    rows = np.arange(degree, dtype=np.intp)
    O_prev = None
    for _ in range(6):
        table[...] = rng.normal(size=table.shape)
        Z_old = step.Z.copy()
        O = step.step_rows(table, rows).copy()
        Lam = np.empty_like(Z_old)
        for i in range(degree):
            X = -(Z_old[i] + table[i].reshape(Q, d)) / (2 * gamma[i])
            n = np.linalg.norm(X)
            Lam[i] = X if n**2 <= eps else X * np.sqrt(eps) / n
        mean_lam = np.tensordot(gamma, Lam, axes=1) / gamma.sum()
        edge = np.linalg.norm(mean_lam - O) / np.linalg.norm(O)
        change = np.inf if O_prev is None else np.linalg.norm(O - O_prev) / np.linalg.norm(O)
        check.async_done(O, step.rhs_buffer)
        assert check.last == pytest.approx(max(edge, change), rel=1e-9)
        O_prev = O


def test_sync_local_residual_is_primal_and_dual():
    check = NodeCheck(StopRule("local", 0.1))
    Zbar = np.ones((2, 2))
    assert not check.sync_done(Zbar * 1.01, Zbar)  # no previous Zbar yet: not done
    assert check.sync_done(Zbar * 1.05, Zbar * 1.02)
    assert check.last == pytest.approx(max(0.03 / 1.02, 0.02 / 1.02))
    assert not check.sync_done(Zbar * 2, Zbar * 1.02)  # the primal residual is large


def test_node_check_needs_what_its_rule_reads():
    with pytest.raises(ValueError):
        NodeCheck(StopRule())
    with pytest.raises(ValueError):
        NodeCheck(StopRule("eps", 1e-2))
    with pytest.raises(ValueError, match="rhs"):
        NodeCheck(StopRule("local", 1e-2)).async_done(np.ones(3))
