"""EdgeStep, the async engine's edge-form activation, against the formulas written out."""

import numpy as np
import pytest

from dssfn_mpi.engines.updates import EdgeStep
from dssfn_mpi.solver import LocalInverse


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


@pytest.mark.parametrize("degree", [1, 3])
@pytest.mark.parametrize("samples", [40, 4], ids=["dense", "woodbury"])
@pytest.mark.parametrize("eps", [1e-3, 1e3], ids=["projected", "free"])
def test_edge_step_matches_the_formulas_over_several_activations(degree, samples, eps):
    rng = np.random.default_rng(degree + samples)
    Q, d = 3, 12
    Y = rng.normal(size=(d, samples))
    gamma = rng.uniform(0.5, 2.0, degree)
    H = 2.0 * Y @ Y.T + gamma.sum() * np.eye(d)
    inv = LocalInverse(Y, float(gamma.sum()))
    B2, eta = rng.normal(size=(Q, d)), 0.7
    step = EdgeStep(B2, gamma, eta, eps, inv)
    Z = rng.normal(size=(degree, Q, d))
    step.Z[...] = Z
    for k in range(4):
        Zr = rng.normal(size=(degree, Q, d))
        O_ref, Z = _reference(Z, Zr, B2, gamma, eta, eps, H)
        views = list(Zr) if k % 2 else Zr  # the mailbox's views, or one array
        O = step(views)
        assert np.allclose(O, O_ref, rtol=1e-10, atol=1e-12)
        assert np.allclose(step.Z, Z, rtol=1e-10, atol=1e-12)


def test_edge_step_first_activation_from_zeros_is_finite():
    # Z = Zr = 0 at a layer's start: the projection's norm is 0 (no division by 0).
    inv = LocalInverse(np.eye(4), 1.0)
    step = EdgeStep(np.ones((2, 4)), np.array([1e9, 1.0]), 1.0, 1.0, inv)
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
