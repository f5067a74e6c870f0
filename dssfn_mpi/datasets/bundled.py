"""``digits``: scikit-learn's bundled 8x8 digits (no file to find), scaled to [0, 1]."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .normalize import make_dataset, random_split
from .records import Dataset

__all__ = ["digits_table", "load_digits"]


def digits_table() -> np.ndarray:
    """The 1797 digits as rows of 64 pixel values (0..16) and the label, float64.

    Read straight from the CSV file scikit-learn ships (``sklearn/datasets/data``)
    without importing scikit-learn, whose import costs a rank about a CPU-second;
    through :func:`sklearn.datasets.load_digits` only where that file is not found.
    """
    spec = importlib.util.find_spec("sklearn")  # locates the package, imports nothing
    if spec is not None and spec.origin is not None:
        path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    return np.column_stack([bunch.data, bunch.target]).astype(np.float64)


def load_digits(paths: Mapping[str, Path], seed: int, options: Mapping[str, object]) -> Dataset:
    table = digits_table()
    A = table[:, :-1] / 16.0  # pixel values are 0..16
    y = table[:, -1].astype(np.int64)
    tr, te = random_split(A.shape[0], 1200, seed)
    return make_dataset("digits", A[tr], y[tr], A[te], y[te], 10)
