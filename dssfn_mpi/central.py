"""The centralized SSFN: every sample in one place, one exact solve per layer.

This is the reference every decentralized run is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .datasets import Dataset
from .model import accuracy, hidden_rows, next_features, one_hot, random_matrix
from .solver import admm_solve, exact_solve_data, objective

__all__ = ["CentralResult", "train_central"]


@dataclass
class CentralResult:
    """Per-layer outcome of :func:`train_central` (lists indexed by layer 0..L)."""

    O: list[np.ndarray] = field(default_factory=list)
    lam: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)


def train_central(
    ds: Dataset,
    layers: int,
    hidden: int,
    eps: float | None = None,
    seed: int = 0,
    solver: str = "exact",
    mu: tuple[float, float] = (1e3, 1e3),
    admm_iters: int = 100,
) -> CentralResult:
    """Train a fixed-size SSFN on the whole training set.

    Parameters
    ----------
    ds : Dataset
        Normalised data, samples as columns.
    layers : int
        Number of hidden layers L; layers 0..L are solved.
    hidden : int
        Hidden width n (>= 2Q).
    eps : float, optional
        Squared Frobenius bound; ``2Q`` (the paper's) when omitted.
    seed : int
        Seed of the shared random matrices.
    solver : {"exact", "admm"}
        ``exact`` is the ground truth; ``admm`` is the SSFN authors'
        early-stopped ADMM with ``mu = (mu_0, mu_l)``.
    mu : tuple of float
        The authors' ``mu`` for layer 0 and for layers >= 1 (admm only).
    admm_iters : int
        ADMM iterations per layer (admm only).

    Returns
    -------
    CentralResult
        Solutions, multipliers (NaN for admm), training cost
        ``||T - O Y||^2``, and train/test accuracy per layer.
    """
    Q = ds.n_classes
    eps = 2.0 * Q if eps is None else float(eps)
    T = one_hot(ds.y_train, Q)
    tt = float(np.vdot(T, T))
    Y, Yt = ds.X_train, ds.X_test
    out = CentralResult()
    for layer in range(layers + 1):
        if layer > 0:
            R = random_matrix(seed, layer, hidden_rows(hidden, Q), Y.shape[0])
            O_prev = out.O[-1]
            Y, Yt = next_features(Y, O_prev, R), next_features(Yt, O_prev, R)
        G, B = Y @ Y.T, T @ Y.T
        if solver == "exact":
            sol = exact_solve_data(Y, T, eps)
            O, lam = sol.O, sol.lam
        elif solver == "admm":
            O, lam = admm_solve(G, B, eps, mu[0] if layer == 0 else mu[1], admm_iters), np.nan
        else:
            raise ValueError(f"unknown solver {solver!r}")
        out.O.append(O)
        out.lam.append(float(lam))
        out.cost.append(objective(O, G, B, tt))
        out.train_accuracy.append(accuracy(O, Y, ds.y_train))
        out.test_accuracy.append(accuracy(O, Yt, ds.y_test))
    return out
