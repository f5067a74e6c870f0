"""``synthetic``: seeded Gaussian-mixture classes with a nonlinear warp (generated)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import UserError
from .normalize import make_dataset, standardize
from .records import Dataset

__all__ = ["load_synthetic"]


def _positive_int(options: Mapping[str, object], key: str) -> int:
    value = options[key]  # load_dataset fills in the defaults
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UserError(f"synthetic: {key} must be a positive integer, got {value!r}")
    return int(value)


def load_synthetic(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    """Seeded classes that a linear model separates only partly.

    Each class is a mixture of 3 Gaussian blobs (so classes are not convex),
    and the space is then warped by ``z + sin(1.5 z A)`` with a random
    orthogonal ``A`` plus a little extra noise. With the defaults a linear
    least-squares classifier gets roughly 65-80 % test accuracy and
    5-nearest-neighbours or a small MLP roughly 85-90 %.
    """
    P = _positive_int(options, "n_features")
    Q = _positive_int(options, "n_classes")
    n_train = _positive_int(options, "n_train")
    n_test = _positive_int(options, "n_test")
    if Q < 2:
        raise UserError(f"synthetic: n_classes must be >= 2, got {Q}")
    if n_train < Q:
        raise UserError(f"synthetic: n_train ({n_train}) must be at least n_classes ({Q})")
    rng = np.random.default_rng(seed)
    n, modes = n_train + n_test, 3
    # Centre spread ~ 1/sqrt(P) keeps the difficulty roughly independent of P.
    centres = rng.standard_normal((Q * modes, P)) * (2.2 / np.sqrt(P))
    # Balanced labels in each part, so every class is in the training set.
    y = np.concatenate([rng.permutation(np.arange(m) % Q) for m in (n_train, n_test)])
    mode = rng.integers(modes, size=n)
    z = centres[y * modes + mode] + 0.5 * rng.standard_normal((n, P))
    A, _ = np.linalg.qr(rng.standard_normal((P, P)))
    x = z + np.sin(1.5 * (z @ A)) + 0.1 * rng.standard_normal((n, P))
    A_tr, A_te = standardize(x[:n_train], x[n_train:])
    return make_dataset("synthetic", A_tr, y[:n_train], A_te, y[n_train:], Q)
