"""The per-iteration update math of the decentralized engines, without MPI.

Pure functions on arrays: the engines call them inside their loops around the
communication, and the serial penalty study (:mod:`dssfn_mpi.bench.studies.penalty`)
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

from ..ssfn.metric import EdgeMetrics, Metric
from ..ssfn.solver import LocalInverse, project_frobenius

__all__ = [
    "consensus_dual",
    "consensus_primal",
    "EdgeStep",
    "MetricEdgeStep",
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
    scratch of an activation, so that an activation allocates nothing. Before
    the local inverse it works neighbour by neighbour on each ``Q x d`` block
    while it is in cache::

        L    = Z_mn + Zr_nm
        t_n  = min(1, sqrt(eps) / ||L / (2 gamma_n)||)      so 2 gamma_n Lam_mn = -t_n L
        rhs += Z_mn - t_n L                                 (rhs starts at 2 B_m)
        Z_mn += (-eta t_n / 2) L                            half of the dual step, early
        O    = rhs H^-1                                     the local inverse
        Z_mn += (-eta gamma_n) O                            for all n

    ``rhs`` is ``2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn)`` (with the old
    ``Z_mn``) and the two updates of ``Z_mn`` make ``Z_mn += eta gamma_mn
    (Lam_mn - O_m)``: the formulas of this module, up to rounding.

    Two implementations of the same steps: compiled loops
    (:mod:`dssfn_mpi.algorithms.kernels`, three passes over each block in all) when
    numba is installed, and in-place BLAS calls, five per neighbour (the
    reference; :meth:`rhs` and :meth:`dual` always run it). Measured with
    ``python -m dssfn_mpi.bench.micro.activation``.

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
    store : tuple (ndarray, int), optional
        Where :attr:`Z` lives: a C-contiguous float64 array of ``d_m`` rows and
        the column where each neighbour's ``Q x d`` values start (the mailbox's
        :meth:`~dssfn_mpi.mailbox.transport.ZMailbox.outbox`, so that the puts send
        :attr:`Z` as it is). Zeroed. Default: an array of its own.
    compiled : bool, optional
        Use the compiled loops (True: raise without numba), the numpy calls
        (False), or the compiled loops when numba is installed (None).

    Attributes
    ----------
    Z : ndarray, shape (d_m, Q, d)
        This node's ``Z_{m,n}``, updated in place by every activation.
    O : ndarray, shape (Q, d)
        ``O_m`` of the last activation (overwritten by the next one).
    compiled : bool
        Whether :meth:`__call__` and :meth:`step_rows` run the compiled loops.
    """

    def __init__(
        self, B2: np.ndarray, gamma: np.ndarray, eta: float, eps: float, inv: LocalInverse,
        store: tuple[np.ndarray, int] | None = None, compiled: bool | None = None,
    ) -> None:
        from . import kernels

        if compiled and not kernels.AVAILABLE:
            raise RuntimeError("the compiled activation needs numba (pip install numba)")
        self.compiled = kernels.AVAILABLE if compiled is None else bool(compiled)
        gamma = np.asarray(gamma, dtype=float).reshape(-1)
        dm, size = gamma.size, B2.size
        if store is None:
            store = (np.zeros((dm, size)), 0)
        self._store, self._off = store
        if (self._store.dtype != np.float64 or not self._store.flags.c_contiguous
                or self._store.shape[0] != dm or self._store.shape[1] < self._off + size):
            raise ValueError(f"store must be C-contiguous float64 with {dm} rows of at least "
                             f"{self._off + size} values")
        self._flat = self._store[:, self._off : self._off + size]  # (d_m, Q d), rows contiguous
        self._flat[...] = 0.0
        self.Z = self._flat.reshape(dm, *B2.shape)
        self.O = np.zeros(B2.shape)
        self.inv = inv
        self._L = np.empty(size)
        self._b2 = np.array(B2, dtype=float).reshape(-1)
        self._rhs = np.empty(B2.shape)
        self._rhs_flat = self._rhs.reshape(-1)
        # Per neighbour: Z_mn as a flat view and 1 / (2 gamma_n).
        self._edges = [(self._flat[i], 0.5 / g) for i, g in enumerate(gamma.tolist())]
        self._h = 0.5 / gamma
        self._b = -eta * gamma
        self._b_list = self._b.tolist()
        self._sqrt_eps = float(np.sqrt(eps))
        self._half_eta = 0.5 * float(eta)
        self._table: np.ndarray | None = None  # __call__'s rows when compiled, and their
        self._table_rows: np.ndarray | None = None  # indices
        self._kernels = kernels

    @property
    def rhs_buffer(self) -> np.ndarray:
        """The last activation's right-hand side ``2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn)``
        (with the ``Z_mn`` from before it): what ``--stop local`` reads
        (:class:`dssfn_mpi.algorithms.stoprule.NodeCheck`). Overwritten by the next activation."""
        return self._rhs

    def rhs(self, Zr: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """First part, in numpy: the right-hand side of ``O_m`` (a buffer of the step).

        Also applies the first half of the dual step to :attr:`Z`, so it must be
        followed by :meth:`dual`. ``Zr`` is a ``(d_m, Q, d)`` array or ``d_m``
        arrays of shape ``(Q, d)`` (the mailbox's views).
        """
        if len(Zr) != len(self._edges):
            raise ValueError(f"{len(Zr)} neighbour values for {len(self._edges)} edges")
        rhs, lrow, se, c = self._rhs_flat, self._L, self._sqrt_eps, -self._half_eta
        rhs[:] = self._b2
        for (z, h), zr in zip(self._edges, Zr):
            np.add(z, zr.reshape(-1), out=lrow)
            # t_n = min(1, sqrt(eps) / max(||L|| / (2 gamma_n), tiny))
            t = min(1.0, se / max(math.sqrt(_ddot(lrow, lrow)) * h, 1e-300))
            _daxpy(z, rhs, a=1.0)
            _daxpy(lrow, rhs, a=-t)
            _daxpy(lrow, z, a=c * t)  # Z_mn += eta gamma_n Lam_mn, while L is in cache
        return self._rhs

    def dual(self, O: np.ndarray) -> None:
        """Second part, in numpy, given ``O_m``: ``Z_mn -= eta gamma_mn O_m`` for every ``n``."""
        if O is not self.O:
            self.O[...] = O
        o = self.O.reshape(-1)
        for (z, _), b in zip(self._edges, self._b_list):
            _daxpy(o, z, a=b)

    def rhs_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """:meth:`rhs` with ``Zr_n = table[rows[i], :Q d]``, compiled when :attr:`compiled`.

        ``table`` is C-contiguous float64 and ``rows`` an intp array, as
        :meth:`dssfn_mpi.mailbox.transport.ZMailbox.read_rows` returns them.
        """
        if len(rows) != len(self._edges):
            raise ValueError(f"{len(rows)} neighbour values for {len(self._edges)} edges")
        if not self.compiled:
            size = self._b2.size
            return self.rhs([table[r, :size] for r in rows.tolist()])
        self._kernels.edge_rhs(self._store, self._off, self._b2.size, table, rows, self._b2,
                               self._h, self._sqrt_eps, -self._half_eta, self._rhs_flat)
        return self._rhs

    def dual_rows(self, O: np.ndarray) -> None:
        """:meth:`dual`, compiled when :attr:`compiled`."""
        if not self.compiled:
            self.dual(O)
            return
        if O is not self.O:
            self.O[...] = O
        self._kernels.edge_dual(self._store, self._off, self._b2.size, self.O.reshape(-1),
                                self._b)

    def step_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """One activation given the neighbours' ``Z_{n,m}`` as rows (as in
        :meth:`rhs_rows`); returns :attr:`O`."""
        self.inv.apply(self.rhs_rows(table, rows), out=self.O)
        self.dual_rows(self.O)
        return self.O

    def __call__(self, Zr: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """One activation given the neighbours' ``Z_{n,m}``; returns :attr:`O`.

        ``Zr`` as in :meth:`rhs`. Compiled, the values are first copied into
        rows (the engine calls :meth:`step_rows` with the mailbox's rows instead).
        """
        if not self.compiled:
            self.inv.apply(self.rhs(Zr), out=self.O)
            self.dual(self.O)
            return self.O
        if len(Zr) != len(self._edges):
            raise ValueError(f"{len(Zr)} neighbour values for {len(self._edges)} edges")
        if self._table is None:
            self._table = np.empty(self._flat.shape)
            self._table_rows = np.arange(len(self._table), dtype=np.intp)
        for row, zr in zip(self._table, Zr):
            row[:] = zr.reshape(-1)
        return self.step_rows(self._table, self._table_rows)


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
    inv: LocalInverse, B2: np.ndarray, rho: float, Zbar: np.ndarray, U: np.ndarray,
    metric: Metric | None = None,
) -> np.ndarray:
    """Consensus ADMM's local step ``O_m = (2 B_m + rho (Zbar - U_m) S) (2 G_m + rho S)^-1``.

    Parameters
    ----------
    inv : LocalInverse or DenseInverse
        ``(2 G_m + rho S)^-1`` (``S = I``: :class:`~dssfn_mpi.ssfn.solver.LocalInverse`).
    B2 : ndarray, shape (Q, d)
        ``2 B_m``.
    rho : float
        The penalty.
    Zbar, U : ndarray, shape (Q, d)
        The consensus variable and this node's scaled dual.

    metric : Metric, optional
        ``S`` (:mod:`dssfn_mpi.ssfn.metric`); the identity when omitted.

    Returns
    -------
    ndarray, shape (Q, d)
        ``O_m``; the caller averages ``O_m + U_m`` over the network.
    """
    if metric is None:
        return inv.apply(B2 + rho * (Zbar - U))
    if getattr(inv, "shifts", False):  # Woodbury in the metric: no product by S
        return inv.apply_shifted(B2, Zbar - U)
    return inv.apply(B2 + rho * metric.times(Zbar - U))


def consensus_dual(mean: np.ndarray, eps: float, O: np.ndarray, U: np.ndarray,
                   metric: Metric | None = None) -> np.ndarray:
    """Consensus ADMM's projection (in the metric ``S``) and dual step; updates ``U`` in place.

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

    metric : Metric, optional
        ``S``: ``Zbar = argmin ||Z - mean||_S^2`` over the ball; the identity when omitted.

    Returns
    -------
    ndarray, shape (Q, d)
        The new ``Zbar = P_eps(mean)``.
    """
    Zbar = project_frobenius(mean, eps) if metric is None else metric.project(mean, eps)
    U += O - Zbar
    return Zbar


class MetricEdgeStep(EdgeStep):
    """:class:`EdgeStep` in a metric: every edge's penalty ``gamma_mn ||.||_S_mn^2``.

    The activation of the edge form with ``S_mn`` (:mod:`dssfn_mpi.ssfn.metric`) in place of
    the identity; both ends of an edge must hold the same ``S_mn``::

        Lam_mn = argmin <Z_mn + Zr_nm, L> + gamma_mn ||L||_S^2  over ||L||^2 <= eps
        O_m    = (2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn S_mn)) H_m^-1,
                 H_m = 2 G_m + sum_n gamma_mn S_mn
        Z_mn  += eta gamma_mn (Lam_mn - O_m) S_mn

    numpy only, each step for all edges at once (:class:`~dssfn_mpi.ssfn.metric.EdgeMetrics`:
    at most four ``Q x d x d`` products per edge, or ``Q x d x k`` ones with a
    :class:`~dssfn_mpi.ssfn.metric.LowRankMetric` of rank ``k``; three where the edge's norm
    bound is inactive): the metric is used where ``d`` is small. Parameters as
    :class:`EdgeStep`, with ``inv`` the inverse of ``H_m`` above
    (:class:`dssfn_mpi.ssfn.metric.DenseInverse`) and ``metrics`` one
    :class:`~dssfn_mpi.ssfn.metric.Metric` (or ``LowRankMetric``) per neighbour, in the order
    of ``gamma``.
    """

    def __init__(
        self, B2: np.ndarray, gamma: np.ndarray, eta: float, eps: float, inv,
        metrics: Sequence, store: tuple[np.ndarray, int] | None = None,
    ) -> None:
        super().__init__(B2, gamma, eta, eps, inv, store=store, compiled=False)
        if len(metrics) != len(self._edges):
            raise ValueError(f"{len(metrics)} metrics for {len(self._edges)} edges")
        self.metrics = EdgeMetrics(metrics, gamma)
        self._gamma = np.asarray(gamma, dtype=float).reshape(-1)
        self._eps, self._two_g = float(eps), 2.0 * self._gamma
        self._eta_g = (float(eta) * self._gamma)[:, None, None]  # eta gamma_mn, per edge
        self._inactive = True  # the last activation found no edge's norm bound active

    def rhs(self, Zr: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """The right-hand side of ``O_m``, and the ``Lam S`` half of the dual step."""
        if len(Zr) != len(self._edges):
            raise ValueError(f"{len(Zr)} neighbour values for {len(self._edges)} edges")
        lam_s = self.metrics.ball_times(self.Z + np.reshape(Zr, self.Z.shape), self._eps)[0]
        self._form_rhs(lam_s)
        self.Z += self._eta_g * lam_s
        return self._rhs

    def _form_rhs(self, lam_s: np.ndarray) -> None:
        """``rhs = 2 B_m + sum_n (Z_mn + 2 gamma_mn Lam_mn S_mn)`` into :attr:`rhs_buffer`."""
        np.add(self._b2.reshape(self._rhs.shape), self.Z.sum(axis=0), out=self._rhs)
        self._rhs_flat += self._two_g @ lam_s.reshape(len(lam_s), -1)

    def rhs_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """:meth:`rhs` with ``Zr_n = table[rows[i], :Q d]``."""
        if len(rows) != len(self._edges):
            raise ValueError(f"{len(rows)} neighbour values for {len(self._edges)} edges")
        return self.rhs(table[rows, : self._b2.size])

    def dual(self, O: np.ndarray) -> None:
        """``Z_mn -= eta gamma_mn O_m S_mn`` for every ``n``."""
        if O is not self.O:
            self.O[...] = O
        self.Z -= self._eta_g * self.metrics.times(self.O)

    def step_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """One activation given the neighbours' ``Z_{n,m}`` as rows (as in :meth:`rhs_rows`);
        returns :attr:`O`.

        Where the last activation found no edge's norm bound active, this one first takes
        that for granted: ``Lam S = -C / (2 gamma)`` needs no product, so ``O_m`` comes
        first and each edge's basis is read once for both ``C_n B_n`` and ``O_m B_n``
        (:meth:`~dssfn_mpi.ssfn.metric.EdgeMetrics.ball_times`); should a bound be active
        after all, the activation is the plain one (:meth:`rhs`, then :meth:`dual`).
        """
        if len(rows) != len(self._edges):
            raise ValueError(f"{len(rows)} neighbour values for {len(self._edges)} edges")
        C = self.Z + table[rows, : self._b2.size].reshape(self.Z.shape)
        guess, OB = self._inactive, None
        if guess:
            self._form_rhs(self.metrics.free(C))
            self.inv.apply(self._rhs, out=self.O)
            lam_s, OB, active = self.metrics.ball_times(C, self._eps, self.O)
        else:
            lam_s, _, active = self.metrics.ball_times(C, self._eps)
        if active or not guess:
            self._form_rhs(lam_s)
            self.inv.apply(self._rhs, out=self.O)
            OB = None
        self._inactive = not active
        self.Z += self._eta_g * lam_s
        self.Z -= self._eta_g * self.metrics.times(self.O, OB)
        return self.O

    def __call__(self, Zr: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """One activation given the neighbours' ``Z_{n,m}`` (as in :meth:`rhs`); returns
        :attr:`O`."""
        if len(Zr) != len(self._edges):
            raise ValueError(f"{len(Zr)} neighbour values for {len(self._edges)} edges")
        Zr = np.reshape(Zr, (len(self._edges), -1))
        return self.step_rows(Zr, np.arange(len(Zr), dtype=np.intp))
