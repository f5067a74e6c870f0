"""The per-iteration update math of the decentralized engines, without MPI.

Pure functions on arrays: the engines call them inside their loops around the
communication, and the serial penalty study (:mod:`dssfn_mpi.bench.penalty`)
calls the same functions, so what it tunes is what the engines run.

Notation (docs/ALGORITHMS.md): node m with ``d_m`` neighbours holds ``B_m = T_m
Y_m^T``, the inverse ``H_m^{-1}`` of ``H_m = 2 G_m + c I`` (``c = sum_n gamma_mn``
for the async forms, ``rho`` for consensus ADMM) and ``P_eps``, the projection
onto ``||O||_F^2 <= eps``.

Async activation, ``edge`` form (exact)::

    Lam_mn = P_eps(-(Z_mn + Zr_nm) / (2 gamma_mn))
    O_m    = (2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn)) H_m^-1
    Z_mn  += eta gamma_mn (Lam_mn - O_m)

Async activation, ``paper`` form (eq. 7 of the paper)::

    O_m    = P_eps((2 B_m - sum_n Zr_nm) H_m^-1)
    Z_mn  -= eta ((Z_mn + Zr_nm) / 2 + gamma_mn O_m)

Consensus ADMM (sync engines), split around the network average::

    O_m  = (2 B_m + rho (Zbar - U_m)) H_m^-1          (consensus_primal)
    Zbar = P_eps(mean_m(O_m + U_m)); U_m += O_m - Zbar  (consensus_dual)

``Z`` and ``Zr`` stack one ``Q x d`` matrix per neighbour, in the order of
``graph.neighbors(m)``: ``Z[i]`` is this node's ``Z_{m,n_i}``, ``Zr[i]`` the
``Z_{n_i,m}`` it last read from neighbour ``n_i``.
"""

from __future__ import annotations

import numpy as np

from ..solver import LocalInverse, project_frobenius

__all__ = [
    "consensus_dual",
    "consensus_primal",
    "edge_activation",
    "edge_dual",
    "edge_rhs",
    "paper_activation",
]


def edge_activation(
    Z: np.ndarray,
    Zr: np.ndarray,
    B2: np.ndarray,
    gamma: np.ndarray,
    eta: float,
    eps: float,
    inv: LocalInverse,
    work: np.ndarray | None = None,
) -> np.ndarray:
    """One async activation in the edge form; updates ``Z`` in place.

    Parameters
    ----------
    Z : ndarray, shape (d_m, Q, d)
        This node's ``Z_{m,n}``, one per neighbour; overwritten with the new values.
    Zr : ndarray, shape (d_m, Q, d)
        The neighbours' ``Z_{n,m}`` as last read (read only).
    B2 : ndarray, shape (Q, d)
        ``2 B_m`` (computed once per layer).
    gamma : ndarray, shape (d_m,)
        The penalty of each edge, > 0.
    eta : float
        Relaxation step.
    eps : float
        Squared Frobenius bound.
    inv : LocalInverse
        ``(2 G_m + sum_n gamma_mn I)^-1``.
    work : ndarray, shape (d_m, Q, d), optional
        Scratch buffer for ``Lam``; given, the activation allocates only ``O_m``
        and its right-hand side (the engine passes one buffer for the layer).

    Returns
    -------
    ndarray, shape (Q, d)
        The new ``O_m``.
    """
    lam = np.empty_like(Z) if work is None else work
    O = inv.apply(edge_rhs(Z, Zr, B2, gamma, eps, lam))
    edge_dual(Z, O, gamma, eta, lam)
    return O


def edge_rhs(
    Z: np.ndarray, Zr: np.ndarray, B2: np.ndarray, gamma: np.ndarray, eps: float, work: np.ndarray
) -> np.ndarray:
    """First half of :func:`edge_activation`: the right-hand side of ``O_m``.

    Returns ``2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn)`` and leaves what
    :func:`edge_dual` needs in ``work`` (shape of ``Z``). Parameters as in
    :func:`edge_activation`.
    """
    lam = work
    # Lam_mn for all neighbours at once, in place: these arrays are d_m x Q x d.
    np.add(Z, Zr, out=lam)
    norms = np.sqrt(np.einsum("kqd,kqd->k", lam, lam)) * (0.5 / gamma)
    lam *= ((-0.5 / gamma) * np.minimum(1.0, np.sqrt(eps) / np.maximum(norms, 1e-300)))[
        :, None, None
    ]
    return B2 + Z.sum(axis=0) + 2.0 * np.tensordot(gamma, lam, axes=1)


def edge_dual(
    Z: np.ndarray, O: np.ndarray, gamma: np.ndarray, eta: float, work: np.ndarray
) -> None:
    """Second half of :func:`edge_activation`: ``Z_mn += eta gamma_mn (Lam_mn - O_m)``.

    ``work`` is what :func:`edge_rhs` left there (it is overwritten).
    """
    lam = work
    lam -= O
    lam *= eta * gamma[:, None, None]
    Z += lam


def paper_activation(
    Z: np.ndarray,
    Zr: np.ndarray,
    B2: np.ndarray,
    gamma: np.ndarray,
    eta: float,
    eps: float,
    inv: LocalInverse,
) -> np.ndarray:
    """One async activation in the paper's form (eq. 7); updates ``Z`` in place.

    Biased when the norm constraint is active (docs/ALGORITHMS.md). Parameters
    as in :func:`edge_activation`.

    Returns
    -------
    ndarray, shape (Q, d)
        The new ``O_m``.
    """
    O = project_frobenius(inv.apply(B2 - Zr.sum(axis=0)), eps)
    Z -= eta * ((Z + Zr) / 2.0 + gamma[:, None, None] * O)
    return O


def consensus_primal(
    inv: LocalInverse, B2: np.ndarray, rho: float, Zbar: np.ndarray, U: np.ndarray
) -> np.ndarray:
    """Consensus ADMM's local step ``O_m = (2 B_m + rho (Zbar - U_m)) (2 G_m + rho I)^-1``.

    Parameters
    ----------
    inv : LocalInverse
        ``(2 G_m + rho I)^-1``.
    B2 : ndarray, shape (Q, d)
        ``2 B_m``.
    rho : float
        The penalty.
    Zbar, U : ndarray, shape (Q, d)
        The consensus variable and this node's scaled dual.

    Returns
    -------
    ndarray, shape (Q, d)
        ``O_m``; the caller averages ``O_m + U_m`` over the network.
    """
    return inv.apply(B2 + rho * (Zbar - U))


def consensus_dual(mean: np.ndarray, eps: float, O: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Consensus ADMM's projection and dual step; updates ``U`` in place.

    Parameters
    ----------
    mean : ndarray, shape (Q, d)
        The network average of ``O_m + U_m``.
    eps : float
        Squared Frobenius bound.
    O : ndarray, shape (Q, d)
        This node's ``O_m`` from :func:`consensus_primal`.
    U : ndarray, shape (Q, d)
        This node's scaled dual; becomes ``U_m + O_m - Zbar``.

    Returns
    -------
    ndarray, shape (Q, d)
        The new ``Zbar = P_eps(mean)``.
    """
    Zbar = project_frobenius(mean, eps)
    U += O - Zbar
    return Zbar
