"""The stopping rules (--stop): parsing, and each node's own test against the formulas."""

import numpy as np
import pytest

from dssfn_mpi.algorithms import kernels
from dssfn_mpi.algorithms.stoprule import (
    MAX_STEPS,
    RATE_WINDOW,
    REASONS,
    NodeCheck,
    StopRule,
    parse_stop,
    reason_code,
    remaining_path,
)
from dssfn_mpi.algorithms.updates import EdgeStep
from dssfn_mpi.errors import UserError
from dssfn_mpi.ssfn.solver import LocalInverse


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
def test_async_local_residual_is_the_edge_gap_and_remaining_path(compiled):
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
    O_prev, changes = None, []
    for _ in range(2 * RATE_WINDOW + 4):
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
        if O_prev is not None:
            changes.append(np.linalg.norm(O - O_prev) / np.linalg.norm(O))
        check.async_done(O, step.rhs_buffer)
        assert check.last == pytest.approx(edge + remaining_path(changes), rel=1e-9)
        O_prev = O
    assert np.isfinite(check.last)  # the windows filled


def test_sync_local_residual_is_primal_plus_remaining_path():
    check = NodeCheck(StopRule("local", 1e-2))
    rng = np.random.default_rng(1)
    star, v = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    rate, prev, changes = 0.9, None, []
    for k in range(2 * RATE_WINDOW + 1):
        Zbar = star + rate**k * v
        O = Zbar + 1e-3 * v
        done = check.sync_done(O, Zbar)
        if prev is not None:
            changes.append(np.linalg.norm(Zbar - prev) / np.linalg.norm(Zbar))
        primal = np.linalg.norm(O - Zbar) / np.linalg.norm(Zbar)
        assert check.last == pytest.approx(primal + remaining_path(changes), rel=1e-9)
        prev = Zbar
    # The estimate is at least the true distance, which a change alone understates 10x here.
    true = np.linalg.norm(Zbar - star) / np.linalg.norm(Zbar)
    assert true <= check.last < 3 * true + primal and changes[-1] < true / 5
    assert not done


def test_local_test_passes_on_the_median_of_the_last_estimates():
    # Not before the windows filled (two of changes, then one of estimates), then for good on
    # a steadily converging sequence.
    check = NodeCheck(StopRule("local", 1e-2))
    rate, star, v = 0.5, np.ones((2, 2)), np.ones((2, 2))
    done = [check.sync_done(star + rate**k * v, star + rate**k * v)
            for k in range(2 * RATE_WINDOW + 3 * RATE_WINDOW)]
    first = done.index(True)
    assert first >= 2 * RATE_WINDOW and all(done[first:])


def test_remaining_path_of_a_geometric_sequence():
    w = RATE_WINDOW
    assert remaining_path([1.0] * (2 * w - 1)) == np.inf  # not enough changes yet
    for rate in (0.5, 0.9, 0.99):
        changes = [rate**k for k in range(3 * w)]
        now = np.mean(changes[-w:])
        assert remaining_path(changes) == pytest.approx(now / (1 - rate), rel=1e-9)
        # no smaller than the sum of every change still to come
        assert remaining_path(changes) >= sum(rate**k for k in range(3 * w, 3000))
    # Changes that do not shrink count as the slowest contraction assumed, so a node at its
    # rounding floor still ends, and one that moves does not.
    assert remaining_path([1e-17] * (2 * w)) == pytest.approx(1e-17 * MAX_STEPS)
    assert remaining_path([1e-3] * (2 * w)) == pytest.approx(1e-3 * MAX_STEPS)


def test_node_check_needs_what_its_rule_reads():
    with pytest.raises(ValueError):
        NodeCheck(StopRule())
    with pytest.raises(ValueError):
        NodeCheck(StopRule("eps", 1e-2))
    with pytest.raises(ValueError, match="rhs"):
        NodeCheck(StopRule("local", 1e-2)).async_done(np.ones(3))
