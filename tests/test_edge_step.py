"""EdgeStep, the async engine's edge-form activation, against the formulas written out."""

import numpy as np
import pytest

from dssfn_mpi.algorithms import kernels
from dssfn_mpi.algorithms.updates import EdgeStep
from dssfn_mpi.ssfn.solver import LocalInverse

needs_numba = pytest.mark.skipif(not kernels.AVAILABLE,
                                 reason="numba is not installed (the `fast` extra)")
# Both implementations of the activation: numpy (the reference) and the compiled loops.
IMPLEMENTATIONS = [pytest.param(False, id="numpy"),
                   pytest.param(True, id="compiled", marks=needs_numba)]


def _reference(Z, Zr, B2, gamma, eta, eps, H):
    """One activation from docs/ALGORITHMS.md, in plain numpy (H: the local matrix)."""
    Lam = np.empty_like(Z)
    for i in range(len(gamma)):
        X = -(Z[i] + Zr[i]) / (2.0 * gamma[i])
        norm = np.linalg.norm(X)
        Lam[i] = X if norm**2 <= eps else X * (np.sqrt(eps) / norm)
    O = np.linalg.solve(H.T, (B2 + sum(Z[i] + 2 * gamma[i] * Lam[i]
                                        for i in range(len(gamma)))).T).T
    Znew = Z + eta * gamma[:, None, None] * (Lam - O)
    return O, Znew


@pytest.mark.parametrize("compiled", IMPLEMENTATIONS)
@pytest.mark.parametrize("degree", [1, 3])
@pytest.mark.parametrize("samples", [40, 4], ids=["dense", "woodbury"])
@pytest.mark.parametrize("eps", [1e-3, 1e3], ids=["projected", "free"])
def test_edge_step_matches_the_formulas_over_several_activations(degree, samples, eps,
                                                                 compiled):
    rng = np.random.default_rng(degree + samples)
    Q, d = 3, 12
    Y = rng.normal(size=(d, samples))
    gamma = rng.uniform(0.5, 2.0, degree)
    H = 2.0 * Y @ Y.T + gamma.sum() * np.eye(d)
    inv = LocalInverse(Y, float(gamma.sum()))
    B2, eta = rng.normal(size=(Q, d)), 0.7
    step = EdgeStep(B2, gamma, eta, eps, inv, compiled=compiled)
    assert step.compiled == compiled
    Z = rng.normal(size=(degree, Q, d))
    step.Z[...] = Z
    for k in range(4):
        Zr = rng.normal(size=(degree, Q, d))
        O_ref, Z = _reference(Z, Zr, B2, gamma, eta, eps, H)
        views = list(Zr) if k % 2 else Zr  # the mailbox's views, or one array
        O = step(views)
        assert np.allclose(O, O_ref, rtol=1e-10, atol=1e-12)
        assert np.allclose(step.Z, Z, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("compiled", IMPLEMENTATIONS)
def test_edge_step_first_activation_from_zeros_is_finite(compiled):
    # Z = Zr = 0 at a layer's start: the projection's norm is 0 (no division by 0).
    inv = LocalInverse(np.eye(4), 1.0)
    step = EdgeStep(np.ones((2, 4)), np.array([1e9, 1.0]), 1.0, 1.0, inv, compiled=compiled)
    with np.errstate(all="raise"):
        O = step(np.zeros((2, 2, 4)))
    assert np.all(np.isfinite(O)) and np.all(np.isfinite(step.Z))


def test_edge_step_rejects_the_wrong_number_of_neighbour_values():
    step = EdgeStep(np.ones((2, 4)), np.ones(2), 1.0, 1.0, LocalInverse(np.eye(4), 2.0))
    with pytest.raises(ValueError, match="edges"):
        step.rhs([np.zeros((2, 4))])


@pytest.mark.parametrize("samples", [40, 4], ids=["dense", "woodbury"])
def test_local_inverse_apply_into_out_equals_apply(samples):
    rng = np.random.default_rng(samples)
    inv = LocalInverse(rng.normal(size=(12, samples)), 2.5)
    X, out = rng.normal(size=(3, 12)), np.empty((3, 12))
    assert inv.apply(X, out=out) is out
    assert np.array_equal(out, inv.apply(X))


@needs_numba
@pytest.mark.parametrize("degree", [1, 4, 16])
@pytest.mark.parametrize("eps", [1e-4, 1e4], ids=["projected", "free"])
def test_compiled_activation_equals_the_numpy_reference_to_1e_12(degree, eps):
    # The engine's form: Z in a store with a header offset (the mailbox's outbox), the
    # neighbours' values as rows of a table (the mailbox's read_rows, a row of zeros for a
    # neighbour that has not written), over many activations so that errors would grow.
    rng = np.random.default_rng(degree)
    Q, n, off = 10, 57, 5
    Y = rng.normal(size=(n, 30))
    gamma = rng.uniform(0.5, 2.0, degree)
    inv = LocalInverse(Y, float(gamma.sum()))
    B2 = rng.normal(size=(Q, n))
    store = np.full((degree, off + Q * n + 3), np.nan)  # only the Z part may be touched
    fast = EdgeStep(B2, gamma, 0.9, eps, inv, store=(store, off), compiled=True)
    ref = EdgeStep(B2, gamma, 0.9, eps, inv, compiled=False)
    assert np.shares_memory(fast.Z, store) and np.all(fast.Z == 0)
    table = np.zeros((2 * degree + 1, Q * n + 7))
    for k in range(30):
        table[:-1, : Q * n] = rng.normal(size=(2 * degree, Q * n))
        rows = rng.integers(0, 2 * degree + 1, size=degree).astype(np.intp)
        O_fast = fast.step_rows(table, rows)
        O_ref = ref([table[r, : Q * n].reshape(Q, n) for r in rows])
        scale = max(np.abs(O_ref).max(), np.abs(ref.Z).max())
        assert np.abs(O_fast - O_ref).max() <= 1e-12 * scale, k
        assert np.abs(fast.Z - ref.Z).max() <= 1e-12 * scale, k
    assert np.all(np.isnan(store[:, :off])) and np.all(np.isnan(store[:, off + Q * n :]))


def test_compiled_without_numba_is_refused_or_runs():
    inv = LocalInverse(np.eye(4), 2.0)
    if kernels.AVAILABLE:
        assert EdgeStep(np.ones((2, 4)), np.ones(2), 1.0, 1.0, inv, compiled=True).compiled
    else:
        with pytest.raises(RuntimeError, match="numba"):
            EdgeStep(np.ones((2, 4)), np.ones(2), 1.0, 1.0, inv, compiled=True)


def test_compiled_status_says_on_only_when_both_compiled(monkeypatch):
    from dssfn_mpi.mailbox import seqlock

    on = kernels.AVAILABLE and seqlock.AVAILABLE
    assert kernels.compiled_status().startswith("on (numba " if on else "off (")
    monkeypatch.setattr(kernels, "numba", None)
    assert kernels.compiled_status() == "off (numba not importable: pip install -e '.[fast]')"
    monkeypatch.setattr(kernels, "numba", object())
    monkeypatch.setattr(kernels, "NUMBA_VERSION", "9.9")
    monkeypatch.setattr(kernels, "AVAILABLE", True)
    monkeypatch.setattr(seqlock, "AVAILABLE", False)
    assert kernels.compiled_status() == "off (numba 9.9 imported but did not compile them)"
    monkeypatch.setattr(seqlock, "AVAILABLE", True)
    assert kernels.compiled_status() == "on (numba 9.9)"
