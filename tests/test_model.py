"""SSFN forward pass and the centralized model."""

import numpy as np
import pytest

from dssfn_mpi.datasets import load_dataset
from dssfn_mpi.ssfn.central import train_central
from dssfn_mpi.ssfn.model import (
    accuracy,
    forward,
    hidden_rows,
    layer_features,
    next_features,
    one_hot,
    random_matrix,
)


def test_random_matrix_is_shared_and_layer_specific():
    a = random_matrix(7, 3, 20, 10)
    assert np.array_equal(a, random_matrix(7, 3, 20, 10))
    assert not np.array_equal(a, random_matrix(7, 4, 20, 10))
    assert not np.array_equal(a, random_matrix(8, 3, 20, 10))
    assert a.min() >= -1.0 and a.max() <= 1.0 and a.shape == (20, 10)


def test_next_features_structure():
    rng = np.random.default_rng(0)
    Y, O = rng.normal(size=(6, 30)), rng.normal(size=(3, 6))
    R = random_matrix(0, 1, 10, 6)
    Z = next_features(Y, O, R)
    assert Z.shape == (16, 30)
    OY = O @ Y
    assert np.allclose(Z[:3], np.maximum(OY, 0))
    assert np.allclose(Z[3:6], np.maximum(-OY, 0))
    # [I; -I] keeps O Y recoverable: relu(x) - relu(-x) = x.
    assert np.allclose(Z[:3] - Z[3:6], OY)
    RY = R @ Y
    assert np.allclose(Z[6:], np.maximum(RY / np.linalg.norm(RY, axis=0), 0))
    assert np.all(np.linalg.norm(Z[6:], axis=0) <= 1 + 1e-12)


def test_layer_features_and_forward_follow_the_layer_map():
    rng = np.random.default_rng(1)
    X, Xt = rng.normal(size=(5, 40)), rng.normal(size=(5, 9))
    Os = [rng.normal(size=(3, 5)), rng.normal(size=(3, 16)), rng.normal(size=(3, 16))]
    # By hand: Y_l = next_features(Y_{l-1}, O_{l-1}, R_l), R_l from (seed, l).
    want = [X]
    for layer in (1, 2):
        R = random_matrix(11, layer, hidden_rows(16, 3), want[-1].shape[0])
        want.append(next_features(want[-1], Os[layer - 1], R))
    got = list(forward(X, Os, seed=11, hidden=16))
    assert len(got) == 3
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    # One R_l for every input: the test set's features use the training set's matrix.
    Y1, Yt1 = layer_features(Os[0], 11, 1, 16, X, Xt)
    assert np.array_equal(Y1, want[1])
    R1 = random_matrix(11, 1, hidden_rows(16, 3), 5)
    assert np.array_equal(Yt1, next_features(Xt, Os[0], R1))


def test_one_hot_and_accuracy():
    y = np.array([0, 2, 1, 2])
    T = one_hot(y, 3)
    assert T.shape == (3, 4) and np.array_equal(T.argmax(axis=0), y)
    assert accuracy(np.eye(3), T, y) == 1.0
    assert accuracy(np.eye(3)[[1, 2, 0]], T, y) == 0.0


@pytest.fixture(scope="module")
def digits_run():
    ds = load_dataset("digits", seed=0)
    return ds, train_central(ds, layers=6, hidden=400, seed=0)


def test_central_cost_never_increases(digits_run):
    _, res = digits_run
    cost = np.array(res.cost)
    # With eps = 2Q the map [I, -I, 0] is feasible, so layer l+1 can copy layer l.
    assert np.all(np.diff(cost) <= 1e-9 * cost[0])
    assert cost[-1] < 0.9 * cost[0]
    assert res.lam[0] >= 0 and all(lam > 0 for lam in res.lam[1:])


def test_central_digits_accuracy(digits_run):
    _, res = digits_run
    assert res.test_accuracy[-1] >= 0.95
    assert res.train_accuracy[-1] >= res.train_accuracy[0]


def test_central_norm_bound_holds(digits_run):
    ds, res = digits_run
    eps = 2.0 * ds.n_classes
    for O in res.O:
        assert np.vdot(O, O) <= eps * (1 + 1e-9)
