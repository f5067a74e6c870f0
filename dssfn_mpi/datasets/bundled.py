"""``digits``: scikit-learn's bundled 8x8 digits (no file to find), scaled to [0, 1]."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .normalize import make_dataset, random_split
from .records import Dataset

__all__ = ["load_digits"]


def load_digits(paths: Mapping[str, Path], seed: int, options: Mapping[str, object]) -> Dataset:
    from sklearn.datasets import load_digits  # slow import; only when asked for

    bunch = load_digits()
    A = np.asarray(bunch.data, dtype=np.float64) / 16.0  # pixel values are 0..16
    y = np.asarray(bunch.target, dtype=np.int64)
    tr, te = random_split(A.shape[0], 1200, seed)
    return make_dataset("digits", A[tr], y[tr], A[te], y[te], 10)
