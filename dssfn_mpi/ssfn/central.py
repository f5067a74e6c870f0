"""The centralized SSFN: every sample in one place, one solve per layer.

This is the reference every decentralized run is compared with. Its layer
solve, :func:`solve_layer`, is also what ``--mode central`` runs
(:class:`dssfn_mpi.engines.exact.ExactEngine`), so the library and the command
line build the same model from the same settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..datasets import Dataset
from .model import accuracy, default_eps, layer_features, one_hot
from .solver import AUTHORS_ADMM_ITERS, admm_solve, exact_solve_data, objective

__all__ = ["CENTRAL_SOLVERS", "CentralResult", "mu_at", "solve_layer", "train_central"]

CENTRAL_SOLVERS = ("exact", "admm")


@dataclass
class CentralResult:
    """Per-layer outcome of :func:`train_central` (lists indexed by layer 0..L)."""

    O: list[np.ndarray] = field(default_factory=list)
    lam: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)


def mu_at(mu: float | Sequence[float], layer: int) -> float:
    """The authors' ``mu`` of ``layer`` from a per-layer list (the last value repeats).

    A pair ``(mu_0, mu_l)`` is the paper's Table 3 form: ``mu_0`` for layer 0,
    ``mu_l`` for every deeper layer.
    """
    if np.isscalar(mu):
        return float(mu)
    return float(mu[min(layer, len(mu) - 1)])


def solve_layer(
    Y: np.ndarray,
    T: np.ndarray,
    eps: float,
    layer: int,
    solver: str = "exact",
    mu: float | Sequence[float] = (1e3, 1e3),
    admm_iters: int = AUTHORS_ADMM_ITERS,
    G: np.ndarray | None = None,
    B: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """One layer of the centralized model: ``min ||T - O Y||^2, ||O||^2 <= eps``.

    Parameters
    ----------
    Y : ndarray, shape (d, J)
        The layer's features of every training sample.
    T : ndarray, shape (Q, J)
        Targets.
    eps : float
        Squared Frobenius bound.
    layer : int
        Layer index (picks the admm's ``mu``).
    solver : {"exact", "admm"}
        ``exact`` is the ground truth; ``admm`` is the SSFN authors'
        early-stopped ADMM (:func:`dssfn_mpi.ssfn.solver.admm_solve`).
    mu : float or sequence of float
        The authors' ``mu`` per layer, the last value repeating (admm only).
    admm_iters : int
        ADMM iterations (admm only).
    G, B : ndarray, optional
        ``Y Y^T`` and ``T Y^T`` if the caller already has them (admm only).

    Returns
    -------
    O : ndarray, shape (Q, d)
    lam : float
        The multiplier (NaN for admm, which has none).
    """
    if solver == "exact":
        sol = exact_solve_data(Y, T, eps)
        return sol.O, sol.lam
    if solver == "admm":
        G = Y @ Y.T if G is None else G
        B = T @ Y.T if B is None else B
        return admm_solve(G, B, eps, mu_at(mu, layer), admm_iters), float("nan")
    raise ValueError(f"unknown solver {solver!r}; choose one of {', '.join(CENTRAL_SOLVERS)}")


def train_central(
    ds: Dataset,
    layers: int,
    hidden: int,
    eps: float | None = None,
    seed: int = 0,
    solver: str = "exact",
    mu: float | Sequence[float] = (1e3, 1e3),
    admm_iters: int = AUTHORS_ADMM_ITERS,
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
        early-stopped ADMM (see :func:`solve_layer`).
    mu : float or sequence of float
        The authors' ``mu`` per layer, the last value repeating, e.g. the
        paper's ``(mu_0, mu_l)`` (admm only); ``--mu`` of ``--mode central``.
    admm_iters : int
        ADMM iterations per layer (admm only).

    Returns
    -------
    CentralResult
        Solutions, multipliers (NaN for admm), training cost
        ``||T - O Y||^2``, and train/test accuracy per layer.
    """
    if solver not in CENTRAL_SOLVERS:
        raise ValueError(f"unknown solver {solver!r}")
    Q = ds.n_classes
    eps = default_eps(Q) if eps is None else float(eps)
    T = one_hot(ds.y_train, Q)
    tt = float(np.vdot(T, T))
    Y, Yt = ds.X_train, ds.X_test
    out = CentralResult()
    for layer in range(layers + 1):
        if layer > 0:
            Y, Yt = layer_features(out.O[-1], seed, layer, hidden, Y, Yt)
        G, B = Y @ Y.T, T @ Y.T
        O, lam = solve_layer(Y, T, eps, layer, solver, mu, admm_iters, G=G, B=B)
        out.O.append(O)
        out.lam.append(float(lam))
        out.cost.append(objective(O, G, B, tt))
        out.train_accuracy.append(accuracy(O, Y, ds.y_train))
        out.test_accuracy.append(accuracy(O, Yt, ds.y_test))
    return out
