"""What every reader shares: the seeded random split, the z-score with the training
statistics, the finite check and the rows-to-columns :class:`~.records.Dataset`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UserError
from .records import Dataset

__all__ = ["check_finite", "make_dataset", "random_split", "standardize"]


def random_split(
    n: int, n_train: int, seed: int, n_test: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)``: the first ``n_train`` of a permutation
    train, the next ``n_test`` (default: all the rest) test."""
    perm = np.random.default_rng(seed).permutation(n)
    stop = n if n_test is None else n_train + n_test
    # Sorted so that the split decides *which* samples, not their order.
    return np.sort(perm[:n_train]), np.sort(perm[n_train:stop])


def standardize(A_train: np.ndarray, A_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Z-score rows-as-samples arrays with the training statistics."""
    mean = A_train.mean(axis=0)
    std = A_train.std(axis=0)
    # ptp is exact, unlike a tiny floating-point std of a constant column.
    std[np.ptp(A_train, axis=0) == 0] = 1.0
    return (A_train - mean) / std, (A_test - mean) / std


def check_finite(A: np.ndarray, path: Path) -> None:
    """UserError naming ``path`` and the first data row unless every value of ``A`` is finite."""
    bad = ~np.isfinite(A)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise UserError(
            f"{path}: {int(bad.sum())} NaN/inf feature value(s) (first in data row {row + 1}); "
            "replace it with a clean copy"
        )


def make_dataset(
    name: str,
    A_train: np.ndarray,
    y_train: np.ndarray,
    A_test: np.ndarray,
    y_test: np.ndarray,
    n_classes: int,
) -> Dataset:
    """Build a Dataset from rows-as-samples arrays (transposed to columns)."""
    return Dataset(
        name=name,
        X_train=np.asfortranarray(A_train.T, dtype=np.float64),
        y_train=np.asarray(y_train, dtype=np.int64),
        X_test=np.asfortranarray(A_test.T, dtype=np.float64),
        y_test=np.asarray(y_test, dtype=np.int64),
        n_classes=int(n_classes),
    )
