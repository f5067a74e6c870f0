"""The central model: one layer solve for the library and ``--mode central``."""

from __future__ import annotations

import numpy as np
import pytest
from mpitools import run_cli
from threadpoolctl import threadpool_limits

from dssfn_mpi.datasets import load_dataset
from dssfn_mpi.ssfn.central import mu_at, solve_layer, train_central
from dssfn_mpi.ssfn.model import one_hot
from dssfn_mpi.ssfn.modelio import load_model
from dssfn_mpi.ssfn.solver import admm_solve


def _authors_iteration(Y, T, alpha, mu, iters=100):
    """The SSFN authors' optimize_O, restated from their paper's ADMM (not their code)."""
    Q, n = T.shape[0], Y.shape[0]
    radius = alpha * np.sqrt(2 * Q)
    Z = np.zeros((Q, n))
    D = np.zeros((Q, n))
    inverse = np.linalg.inv(Y @ Y.T + np.eye(n) / mu)
    for _ in range(iters):
        O = (T @ Y.T + (Z + D) / mu) @ inverse
        V = O - D
        size = np.sqrt(np.sum(V * V))
        Z = V * (radius / size) if size > radius else V
        D = D + Z - O
    return O


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", seed=0)


@pytest.mark.parametrize("mu", [1e-2, 1.0, 1e2, 1e4])
def test_admm_is_the_authors_form(digits, mu):
    # Layer 0 of digits, eps = 2Q: the authors' alpha = 1.
    Y, T = digits.X_train, one_hot(digits.y_train, digits.n_classes)
    ref = _authors_iteration(Y, T, alpha=1.0, mu=mu)
    O, lam = solve_layer(Y, T, 2.0 * digits.n_classes, 0, "admm", mu)
    assert np.isnan(lam)
    assert np.linalg.norm(O - ref) / np.linalg.norm(ref) < 1e-10
    lib = train_central(digits, layers=0, hidden=100, solver="admm", mu=mu)
    assert np.linalg.norm(lib.O[0] - ref) / np.linalg.norm(ref) < 1e-10


def test_half_scaled_form_is_a_different_model(digits):
    # Control: the form --mode central used before (G/2, B/2) is caught by the test above.
    Y, T = digits.X_train, one_hot(digits.y_train, digits.n_classes)
    ref = _authors_iteration(Y, T, alpha=1.0, mu=1.0)
    half = admm_solve(0.5 * Y @ Y.T, 0.5 * T @ Y.T, 2.0 * digits.n_classes, 1.0, 100)
    assert np.linalg.norm(half - ref) / np.linalg.norm(ref) > 1e-4


def test_mu_per_layer_last_value_repeats(digits):
    assert [mu_at((1e2, 1e4), layer) for layer in range(3)] == [1e2, 1e4, 1e4]
    assert mu_at((1.0, 2.0, 3.0), 2) == 3.0 and mu_at(5.0, 9) == 5.0
    pair = train_central(digits, layers=2, hidden=80, solver="admm", mu=(1e2, 1e4))
    listed = train_central(digits, layers=2, hidden=80, solver="admm", mu=[1e2, 1e4, 1e4])
    for a, b in zip(pair.O, listed.O):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError):
        train_central(digits, layers=0, hidden=80, solver="lu")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("solver, mu", [("admm", "1e2,1e4"), ("admm", "0.01"), ("exact", None)])
def test_cli_and_library_give_identical_weights(tmp_path, digits, solver, mu):
    model = tmp_path / "m.h5"
    extra = ["--mu", mu] if mu is not None else []
    res = run_cli(None, "train", "--mode", "central", "--central-solver", solver, *extra,
                  "--dataset", "digits", "--layers", "3", "--hidden", "90", "--seed", "0",
                  "--save-model", str(model), "--quiet", timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    cli = load_model(model).nodes[0]
    mus = tuple(float(v) for v in mu.split(",")) if mu is not None else (1e3,)
    # bit for bit needs the CLI's one BLAS thread here too, whatever the shell exports
    with threadpool_limits(limits=1):
        lib = train_central(digits, layers=3, hidden=90, seed=0, solver=solver, mu=mus)
    assert len(cli) == len(lib.O) == 4
    for layer, (a, b) in enumerate(zip(cli, lib.O)):
        assert np.array_equal(a, b), (layer, np.abs(a - b).max())
