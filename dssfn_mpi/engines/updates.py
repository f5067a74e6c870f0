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

import math
from collections.abc import Sequence

import numpy as np
from scipy.linalg.blas import daxpy as _daxpy
from scipy.linalg.blas import ddot as _ddot

from ..solver import LocalInverse, project_frobenius

__all__ = [
    "consensus_dual",
    "consensus_primal",
    "EdgeStep",
    "edge_activation",
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

    The arithmetic is :class:`EdgeStep`'s (what the engine runs); this function
    copies ``Z`` in and out of a fresh step, for callers that keep their own ``Z``.

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
    work : ndarray, optional
        Unused (the step owns its buffers); accepted for callers of the earlier
        signature.

    Returns
    -------
    ndarray, shape (Q, d)
        The new ``O_m``.
    """
    step = EdgeStep(B2, gamma, eta, eps, inv)
    step.Z[...] = Z
    O = step(Zr).copy()
    Z[...] = step.Z
    return O


class EdgeStep:
    """The edge-form activation of one node for one layer, on buffers allocated once.

    Holds this node's ``Z_{m,n}`` (attribute :attr:`Z`, zeros at first) and the
    scratch of an activation, so that an activation allocates nothing. It works
    neighbour by neighbour with in-place BLAS calls, each neighbour's
    ``Q x d`` blocks still in cache from the call before::

        L_n  = Z_mn + Zr_nm
        t_n  = min(1, sqrt(eps) / ||L_n / (2 gamma_n)||)    so 2 gamma_n Lam_n = -t_n L_n
        rhs  = 2 B_m + sum_n (Z_mn - t_n L_n)               two axpy per neighbour
        O    = rhs H^-1                                     the local inverse
        Z_mn += (-eta t_n / 2) L_n + (-eta gamma_n) O       two axpy per neighbour

    ``rhs`` is ``2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn)`` and the last line is
    ``Z_mn += eta gamma_mn (Lam_mn - O_m)``: the formulas of this module, up to
    rounding. (Measured with ``python -m dssfn_mpi.bench.activation``: whole-array
    numpy expressions cost 2 - 3 times more here, in temporaries and passes over
    data the local inverse has pushed out of the cache.)

    Parameters
    ----------
    B2 : ndarray, shape (Q, d)
        ``2 B_m``.
    gamma : ndarray, shape (d_m,)
        The penalty of each edge, > 0.
    eta : float
        Relaxation step.
    eps : float
        Squared Frobenius bound.
    inv : LocalInverse
        ``(2 G_m + sum_n gamma_mn I)^-1``.

    Attributes
    ----------
    Z : ndarray, shape (d_m, Q, d)
        This node's ``Z_{m,n}``, updated in place by every activation.
    O : ndarray, shape (Q, d)
        ``O_m`` of the last activation (overwritten by the next one).
    """

    def __init__(
        self, B2: np.ndarray, gamma: np.ndarray, eta: float, eps: float, inv: LocalInverse
    ) -> None:
        gamma = np.asarray(gamma, dtype=float).reshape(-1)
        d = gamma.size
        self.Z = np.zeros((d, *B2.shape))
        self.O = np.zeros(B2.shape)
        self._L = np.empty((d, B2.size))
        self._b2 = np.array(B2, dtype=float).reshape(-1)
        self._rhs = np.empty(B2.shape)
        self._rhs_flat = self._rhs.reshape(-1)
        # Per neighbour: Z_mn and L_n as flat contiguous views, 1 / (2 gamma_n), -eta gamma_n.
        self._edges = [(self.Z[i].reshape(-1), self._L[i], 0.5 / g, -eta * g)
                       for i, g in enumerate(gamma.tolist())]
        self._sqrt_eps = float(np.sqrt(eps))
        self._eta = float(eta)
        self._t = [1.0] * d
        self.inv = inv

    def rhs(self, Zr: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """First part: ``2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn)`` (a buffer of the step).

        ``Zr`` is a ``(d_m, Q, d)`` array or ``d_m`` arrays of shape ``(Q, d)``
        (the mailbox's views).
        """
        if len(Zr) != len(self._edges):
            raise ValueError(f"{len(Zr)} neighbour values for {len(self._edges)} edges")
        rhs, se = self._rhs_flat, self._sqrt_eps
        rhs[:] = self._b2
        t = self._t
        # Neighbour by neighbour, so that Z_n and L_n are still in cache for the axpys.
        for i, ((z, lrow, h, _), zr) in enumerate(zip(self._edges, Zr)):
            np.add(z, zr.reshape(-1), out=lrow)
            # t_n = min(1, sqrt(eps) / max(||L_n|| / (2 gamma_n), tiny))
            t[i] = min(1.0, se / max(math.sqrt(_ddot(lrow, lrow)) * h, 1e-300))
            _daxpy(z, rhs, a=1.0)
            _daxpy(lrow, rhs, a=-t[i])
        return self._rhs

    def dual(self, O: np.ndarray) -> None:
        """Second part: ``Z_mn += eta gamma_mn (Lam_mn - O_m)`` given ``O_m``."""
        if O is not self.O:
            self.O[...] = O
        o, c = self.O.reshape(-1), -0.5 * self._eta
        for (z, lrow, _, b), t in zip(self._edges, self._t):
            _daxpy(lrow, z, a=c * t)
            _daxpy(o, z, a=b)

    def __call__(self, Zr: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """One activation given the neighbours' ``Z_{n,m}``; returns :attr:`O`."""
        self.inv.apply(self.rhs(Zr), out=self.O)
        self.dual(self.O)
        return self.O


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
