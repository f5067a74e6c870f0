"""Tests for dssfn_mpi.datasets.partition: cover, balance, label skew, determinism, errors."""

from __future__ import annotations

import numpy as np
import pytest

from dssfn_mpi.datasets.partition import parse_scheme, partition
from dssfn_mpi.errors import UserError

SCHEME_CASES = ["uniform", "stratified", "dirichlet:0.1", "dirichlet:1", "dirichlet:1000"]


def _labels(j: int = 997, n_classes: int = 7, seed: int = 0) -> np.ndarray:
    # Deliberately unequal class sizes so balancing is not trivial.
    rng = np.random.default_rng(seed)
    p = np.arange(1, n_classes + 1, dtype=float)
    return rng.choice(n_classes, size=j, p=p / p.sum())


def _check_cover(shards: list[np.ndarray], j: int, m: int) -> None:
    assert len(shards) == m
    for s in shards:
        assert s.dtype == np.int64
        assert s.ndim == 1
        assert (np.diff(s) > 0).all()  # sorted, no repeats
        assert s.size >= 1
    allidx = np.concatenate(shards)
    assert allidx.size == j
    np.testing.assert_array_equal(np.sort(allidx), np.arange(j))


def _label_tv(y: np.ndarray, shards: list[np.ndarray]) -> float:
    """Mean total-variation distance between node label distributions and the global one."""
    classes = np.unique(y)
    glob = np.array([(y == c).mean() for c in classes])
    tvs = []
    for s in shards:
        local = np.array([(y[s] == c).mean() for c in classes])
        tvs.append(0.5 * np.abs(local - glob).sum())
    return float(np.mean(tvs))


@pytest.mark.parametrize("scheme", SCHEME_CASES)
@pytest.mark.parametrize("m", [1, 2, 7, 20, 64])
def test_disjoint_cover(scheme: str, m: int) -> None:
    y = _labels()
    _check_cover(partition(y, m, scheme, seed=3), y.size, m)


@pytest.mark.parametrize("scheme", ["uniform", "stratified"])
@pytest.mark.parametrize(("j", "m"), [(997, 20), (1000, 20), (20, 20), (21, 20), (5, 3), (100, 1)])
def test_size_balance(scheme: str, j: int, m: int) -> None:
    shards = partition(_labels(j), m, scheme, seed=1)
    sizes = [s.size for s in shards]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == j


@pytest.mark.parametrize(("j", "m", "q"), [(997, 20, 7), (1797, 20, 10), (60, 8, 13), (33, 4, 2)])
def test_stratified_per_class_balance(j: int, m: int, q: int) -> None:
    y = _labels(j, q, seed=j)
    shards = partition(y, m, "stratified", seed=5)
    counts = np.array([[np.sum(y[s] == c) for c in range(q)] for s in shards])
    spread = counts.max(axis=0) - counts.min(axis=0)
    assert (spread <= 1).all(), spread
    sizes = counts.sum(axis=1)
    assert sizes.max() - sizes.min() <= 1


def test_uniform_is_not_class_balanced_by_construction() -> None:
    # Guards the stratified test from passing vacuously: plain uniform shards do
    # show per-class spreads above one on the same data.
    y = _labels(997, 7, seed=997)
    shards = partition(y, 20, "uniform", seed=5)
    counts = np.array([[np.sum(y[s] == c) for c in range(7)] for s in shards])
    assert (counts.max(axis=0) - counts.min(axis=0)).max() > 1


def test_uniform_mixes_samples() -> None:
    # A random permutation, not contiguous blocks.
    shards = partition(np.zeros(1000), 10, "uniform", seed=0)
    assert not any(
        np.array_equal(s, np.arange(k * 100, (k + 1) * 100)) for k, s in enumerate(shards)
    )


def test_dirichlet_small_alpha_is_label_skewed() -> None:
    y = _labels(2000, 10, seed=11)
    tv_uniform = _label_tv(y, partition(y, 10, "uniform", seed=2))
    tv_strat = _label_tv(y, partition(y, 10, "stratified", seed=2))
    tv_small = _label_tv(y, partition(y, 10, "dirichlet:0.1", seed=2))
    tv_large = _label_tv(y, partition(y, 10, "dirichlet:1000", seed=2))
    assert tv_strat < 0.02
    assert tv_uniform < 0.15
    assert tv_small > 0.5
    assert tv_small > 5 * tv_uniform
    # A huge concentration gives nearly the global distribution everywhere.
    assert tv_large < 0.15


def test_dirichlet_tiny_alpha_repairs_empty_nodes() -> None:
    y = _labels(200, 3, seed=1)
    for seed in range(5):
        shards = partition(y, 30, "dirichlet:0.001", seed=seed)
        _check_cover(shards, 200, 30)
    # J == M: every node ends with exactly one sample.
    shards = partition(np.arange(12) % 2, 12, "dirichlet:0.01", seed=0)
    assert [s.size for s in shards] == [1] * 12


@pytest.mark.parametrize("scheme", SCHEME_CASES)
def test_deterministic_and_seed_dependent(scheme: str) -> None:
    y = _labels()
    a = partition(y, 8, scheme, seed=42)
    b = partition(y.copy(), 8, scheme, seed=42)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    c = partition(y, 8, scheme, seed=43)
    assert not all(np.array_equal(u, v) for u, v in zip(a, c))


def test_non_integer_labels_and_numpy_ints() -> None:
    y = np.array(["cat", "dog", "cat", "emu", "dog", "cat"])
    shards = partition(y, np.int64(3), "stratified", seed=np.int32(0))
    _check_cover(shards, 6, 3)
    # 3 cats over 3 nodes: one each.
    assert sorted(int(np.sum(y[s] == "cat")) for s in shards) == [1, 1, 1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("uniform", ("uniform", None)),
        (" Stratified ", ("stratified", None)),
        ("dirichlet:0.5", ("dirichlet", 0.5)),
        ("dirichlet: 2", ("dirichlet", 2.0)),
        ("DIRICHLET:1e-3", ("dirichlet", 1e-3)),
    ],
)
def test_parse_scheme(text: str, expected: tuple) -> None:
    assert parse_scheme(text) == expected


@pytest.mark.parametrize(
    ("scheme", "pattern"),
    [
        (
            "random",
            r"unknown partition scheme 'random': "
            r"choose one of uniform, stratified, dirichlet:ALPHA$",
        ),
        ("", r"unknown partition scheme ''"),
        ("uniform:3", r"scheme 'uniform' takes no parameter"),
        ("stratified:", r"scheme 'stratified' takes no parameter"),
        ("dirichlet", r"needs a concentration ALPHA > 0"),
        ("dirichlet:", r"needs a concentration ALPHA > 0"),
        ("dirichlet:abc", r"dirichlet concentration 'abc' is not a number"),
        ("dirichlet:0", r"dirichlet concentration must be a finite number > 0, got '0'"),
        ("dirichlet:-1", r"must be a finite number > 0, got '-1'"),
        ("dirichlet:nan", r"must be a finite number > 0, got 'nan'"),
        ("dirichlet:inf", r"must be a finite number > 0, got 'inf'"),
    ],
)
def test_scheme_errors(scheme: str, pattern: str) -> None:
    with pytest.raises(UserError, match=pattern):
        parse_scheme(scheme)
    with pytest.raises(UserError, match=pattern):
        partition(np.arange(10), 2, scheme)


@pytest.mark.parametrize("scheme", SCHEME_CASES)
def test_too_few_samples(scheme: str) -> None:
    with pytest.raises(UserError, match=r"^cannot split 5 samples over 8 nodes: use fewer ranks$"):
        partition(np.arange(5), 8, scheme)


@pytest.mark.parametrize(
    ("n_nodes", "seed", "pattern"),
    [
        (0, 0, r"need at least 1 node to partition over, got 0"),
        (-2, 0, r"need at least 1 node to partition over, got -2"),
        (2.0, 0, r"number of nodes must be an integer"),
        (True, 0, r"number of nodes must be an integer"),
        (2, -1, r"seed must be a non-negative integer"),
        (2, 1.5, r"seed must be a non-negative integer"),
    ],
)
def test_argument_errors(n_nodes, seed, pattern: str) -> None:
    with pytest.raises(UserError, match=pattern):
        partition(np.arange(10), n_nodes, "uniform", seed=seed)


def test_labels_must_be_one_dimensional() -> None:
    with pytest.raises(ValueError, match="1-D"):
        partition(np.zeros((4, 3)), 2)
