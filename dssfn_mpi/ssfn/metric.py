"""The metric of a preconditioned ADMM: a symmetric positive definite ``S`` on the feature side.

A scalar penalty ``gamma ||X||_F^2`` weighs every direction of the feature space alike; the
input layer's Gram matrix spans five decades (digits: condition number ~2e5), and ADMM with
any scalar penalty then needs thousands of iterations (docs/ALGORITHMS.md, "The metric").
The metric form replaces ``||X||_F^2`` by ``||X||_S^2 = trace(X S X^T)`` with ``S`` shaped
like the curvature. Each ADMM constraint ``O_m = Lam`` becomes ``O_m S^1/2 = Lam S^1/2``: the
same feasible set and fixed point, the exact ``O*``, with steps scaled to the data.

Two kinds of step change, both exact in ``S``'s eigenbasis ``S = V diag(s) V^T`` where the
norm bound ``||X||_F^2 <= eps`` is rotation invariant, so that one scalar multiplier
``nu >= 0`` solves each (a secular equation, as for the exact layer solution):

* the edge form's ``Lam`` step, ``argmin <C, L> + gamma ||L||_S^2`` over the ball:
  ``L V = -(C V) diag(1 / (2 gamma s + 2 nu))`` (:meth:`Metric.ball_step`);
* consensus ADMM's average, ``argmin ||Z - W||_S^2`` over the ball:
  ``Z V = (W V) diag(s / (s + nu))`` (:meth:`Metric.project`).

With ``S = I`` both reduce to the scalar forms (a rescaling onto the ball).

Where the Gram part has rank ``k`` well below ``d`` (an edge's two nodes hold fewer samples
than the layer is wide), every other eigenvalue of ``S`` is the ridge ``c``:
:class:`LowRankMetric` keeps ``S = U diag(t) U^T + c I`` with ``U`` of ``d x k``, and the
floor's ``d - k`` directions enter each step as one group (one weight, one denominator),
so the steps are the same and cost ``O(Q d k)``; :func:`metric_from_grams` decides which form.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.linalg
from scipy.linalg.blas import dspmv, dsyrk
from scipy.linalg.lapack import dpotri, dpstrf

from .solver import RhsCache, secular_root, secular_roots

__all__ = ["Metric", "LowRankMetric", "EdgeMetrics", "DenseInverse", "MetricWoodbury",
           "gram_metric", "metric_from_grams", "metric_sum", "LOW_RANK", "RIDGE", "STACK"]

# The metric is a Gram matrix plus RIDGE times its mean eigenvalue: the input layer's Gram
# can be singular (digits has constant pixels), and S must be positive definite. 1e-3 is
# the value of the layer-0 measurements in docs/ALGORITHMS.md; the fixed point does not
# depend on it.
RIDGE = 1e-3

# The low-rank form where the Gram part's rank k is at most LOW_RANK * d: an edge's
# activation then takes five Q x d x k products in place of four Q x d x d ones, and each
# edge d k values in place of d^2.
LOW_RANK = 0.75

# EdgeMetrics stacks a node's edge bases (zero-padded to d x K) and matrices S into one
# array each, for one product per step over all edges, where d K and d^2 are at most STACK
# (d <= 64): there an activation's cost is its calls, not its arithmetic. Wider ones are
# multiplied edge by edge, in place: each edge's metric is one object held by both its
# ends, and a stacked copy at each end would triple its memory.
STACK = 4_096


def gram_metric(*grams: np.ndarray) -> np.ndarray:
    """The metric matrix ``mean(grams) + RIDGE * trace(mean) / d * I``.

    Parameters
    ----------
    *grams : ndarray, shape (d, d)
        Symmetric positive semi-definite matrices (a node's and its neighbour's ``G``,
        or the network mean of ``G_m``).

    Returns
    -------
    ndarray, shape (d, d)
        Symmetric positive definite (unless every Gram is zero: then the identity).
    """
    S, c = _mean_gram(grams)
    S[np.diag_indices(S.shape[0])] += c
    return S


def _mean_gram(grams: tuple[np.ndarray, ...]) -> tuple[np.ndarray, float]:
    """The symmetrised mean of ``grams`` and the ridge ``c`` :func:`gram_metric` adds."""
    G = np.array(grams[0], dtype=float)
    for g in grams[1:]:  # in order: np.mean over a stack's first axis, bit for bit
        G += g
    G /= len(grams)
    G += G.T
    G *= 0.5
    scale = float(np.trace(G)) / G.shape[0]
    return G, RIDGE * scale if scale > 0 else 1.0


def metric_from_grams(*grams: np.ndarray) -> Metric | LowRankMetric:
    """The metric of :func:`gram_metric` ``(*grams)``, low-rank where that pays.

    The mean Gram's rank ``k`` comes from a pivoted Cholesky factorisation (LAPACK's
    ``dpstrf``, its rank tolerance ``d * eps * max G_ii``: ``O(d^2 k)``, no ``d x d``
    eigendecomposition); with ``k <= LOW_RANK * d`` the factor's thin SVD gives
    :class:`LowRankMetric`, else :class:`Metric` holds the dense ``S``.

    Parameters
    ----------
    *grams : ndarray, shape (d, d)
        Symmetric positive semi-definite matrices (an edge's two ends' ``G``).

    Returns
    -------
    Metric or LowRankMetric
        ``S = mean(grams) + c I`` (``c`` the ridge of :func:`gram_metric`).
    """
    G, c = _mean_gram(grams)
    d = G.shape[0]
    L, piv, rank, info = dpstrf(G, lower=1)
    if info < 0:
        raise ValueError(f"dpstrf: illegal argument {-info}")
    if rank <= LOW_RANK * d:
        F = np.empty((d, rank))
        F[piv - 1] = np.tril(L[:, :rank])  # G = F F^T (P^T G P = L L^T)
        U, sigma, _ = scipy.linalg.svd(F, full_matrices=False, check_finite=False)
        return LowRankMetric(U, sigma**2, c)
    G[np.diag_indices(d)] += c
    return Metric(G)


def metric_sum(weights: np.ndarray, metrics) -> np.ndarray:
    """``sum_n w_n S_n`` as a ``d x d`` matrix, for weights ``w_n >= 0``.

    The low-rank metrics (:class:`LowRankMetric`) enter as one symmetric rank-``k`` update
    (BLAS ``dsyrk`` of their ``U_n diag(sqrt(w_n t_n))`` side by side) and their floors on
    the diagonal, with no ``d x d`` matrix per metric; the dense ones (:class:`Metric`) are
    added.

    Parameters
    ----------
    weights : ndarray, shape (n,)
        Non-negative (a node's edge penalties).
    metrics : sequence of Metric or LowRankMetric
        ``n`` metrics of the same ``d``.

    Returns
    -------
    ndarray, shape (d, d)
        Symmetric.
    """
    weights = np.asarray(weights, dtype=float).reshape(-1)
    if np.any(weights < 0):
        raise ValueError(f"the weights must be >= 0, got {weights.min():g}")
    low = [(w, s) for w, s in zip(weights, metrics) if isinstance(s, LowRankMetric)]
    d = metrics[0].d
    K = np.zeros((d, d))
    if low:
        V = np.hstack([s.U * np.sqrt(w * s.t) for w, s in low])
        if V.shape[1]:
            K = dsyrk(1.0, V.T, trans=1)  # V V^T, its upper triangle (Fortran order)
            K += np.triu(K, 1).T
        K[np.diag_indices(d)] += sum(w * s.c for w, s in low)
    for w, s in zip(weights, metrics):
        if not isinstance(s, LowRankMetric):
            K += w * s.matrix()
    return K


class Metric:
    """A symmetric positive definite ``S`` with its eigendecomposition, and its two steps.

    Parameters
    ----------
    S : ndarray, shape (d, d)
        Symmetric positive definite (e.g. from :func:`gram_metric`).
    """

    def __init__(self, S: np.ndarray) -> None:
        s, V = scipy.linalg.eigh(S, check_finite=False)
        if not s[0] > 0:
            raise ValueError(f"the metric must be positive definite (smallest eigenvalue {s[0]:g})")
        self.S = np.ascontiguousarray(S)
        self.s, self.V = s, np.ascontiguousarray(V)
        self._inverse: np.ndarray | None = None

    def inverse(self) -> np.ndarray:
        """``S^-1 = V diag(1 / s) V^T`` (formed once; then :meth:`solve` multiplies by it)."""
        if self._inverse is None:
            inv = (self.V / self.s) @ self.V.T
            self._inverse = 0.5 * (inv + inv.T)
        return self._inverse

    @property
    def d(self) -> int:
        """The dimension of ``S``."""
        return self.s.shape[0]

    def compact(self) -> Metric:
        """Drop the matrix ``S`` and keep its eigendecomposition alone (half the memory):
        :meth:`times` then multiplies through ``V``. Returns itself."""
        self.S = None
        return self

    def matrix(self) -> np.ndarray:
        """``S`` (formed from ``V`` and ``s`` if :meth:`compact` dropped it)."""
        return self.S if self.S is not None else (self.V * self.s) @ self.V.T

    def times(self, X: np.ndarray) -> np.ndarray:
        """``X S`` (``X``: one matrix, or a stack of them)."""
        if self.S is None:
            return ((X @ self.V) * self.s) @ self.V.T
        return _rows_times(X, self.S)

    def solve(self, X: np.ndarray) -> np.ndarray:
        """``X S^-1``: by :meth:`inverse` (formed on the first call), or through ``V`` once
        :meth:`compact` dropped ``S`` (no second ``d x d`` matrix)."""
        if self._inverse is None and self.S is None:
            return ((X @ self.V) / self.s) @ self.V.T
        return _rows_times(X, self.inverse())

    def ball_step(self, C: np.ndarray, gamma: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
        """The edge form's ``Lam = argmin <C, L> + gamma ||L||_S^2`` s.t. ``||L||_F^2 <= eps``.

        Returns
        -------
        (ndarray, ndarray)
            ``Lam`` and ``Lam S`` (both Q x d), the second without another product by ``S``.
            A node's activation takes the second for all its edges at once
            (:meth:`EdgeMetrics.ball_times`).
        """
        CV = C @ self.V
        w = np.einsum("qi,qi->i", CV, CV)
        den = 2.0 * gamma * self.s
        LV = CV / -(den + secular_root(w, den, eps))  # 2 gamma s + 2 nu
        return LV @ self.V.T, (LV * self.s) @ self.V.T

    def project(self, W: np.ndarray, eps: float) -> np.ndarray:
        """``argmin ||Z - W||_S^2`` s.t. ``||Z||_F^2 <= eps`` (``W`` itself when inside)."""
        if float(np.vdot(W, W)) <= eps:
            return W
        WV = W @ self.V
        w = np.einsum("qi,qi->i", WV, WV)
        nu = secular_root(w * self.s**2, self.s, eps)
        return (WV * (self.s / (self.s + nu))) @ self.V.T


class LowRankMetric:
    """``S = U diag(t) U^T + c I`` (``U``: ``d x k`` orthonormal, ``t >= 0``, ``c > 0``), with
    :class:`Metric`'s steps in ``O(Q d k)``.

    ``S``'s eigenvalues are ``s = t + c`` on ``U``'s columns and the floor ``c`` on the
    ``d - k`` directions orthogonal to them. The steps act on the floor's directions through
    the residual ``R = X - (X U) U^T``: they share one eigenvalue, so in each secular
    equation they are one term (weight ``||R||^2``), and each step is the dense form's
    (:class:`Metric` of the same ``S``) in exact arithmetic. Built by
    :func:`metric_from_grams`.

    Parameters
    ----------
    U : ndarray, shape (d, k)
        Orthonormal columns.
    t : ndarray, shape (k,)
        ``S``'s eigenvalues on them minus ``c``.
    c : float
        The floor, > 0.
    """

    def __init__(self, U: np.ndarray, t: np.ndarray, c: float) -> None:
        if not c > 0:
            raise ValueError(f"the metric must be positive definite (floor {c:g})")
        self.U, self.t, self.c = np.ascontiguousarray(U), np.asarray(t, dtype=float), float(c)
        self.s = self.t + self.c

    @property
    def d(self) -> int:
        """The dimension of ``S``."""
        return self.U.shape[0]

    def compact(self) -> LowRankMetric:
        """Nothing to drop (no ``d x d`` matrix is held). Returns itself."""
        return self

    def matrix(self) -> np.ndarray:
        """``S`` as a ``d x d`` matrix."""
        S = (self.U * self.t) @ self.U.T
        S[np.diag_indices(S.shape[0])] += self.c
        return S

    def times(self, X: np.ndarray) -> np.ndarray:
        """``X S = (X U) diag(t) U^T + c X`` (``X``: one matrix, or a stack of them)."""
        return _rows_times(_rows_times(X, self.U) * self.t, self.U.T) + self.c * X

    def solve(self, X: np.ndarray) -> np.ndarray:
        """``X S^-1 = (X U) diag(1 / s - 1 / c) U^T + X / c``."""
        coef = 1.0 / self.s - 1.0 / self.c
        return _rows_times(_rows_times(X, self.U) * coef, self.U.T) + X / self.c

    def ball_step(self, C: np.ndarray, gamma: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`Metric.ball_step`: ``Lam`` and ``Lam S`` (both Q x d)."""
        P, a, b = self._ball(C, gamma, eps)
        # Lam S = (P (a s)) U^T + b c R = (P (a s - b c)) U^T + b c C; |b c| <= |a s|.
        LS = (P * (a * self.s - b * self.c)) @ self.U.T + (b * self.c) * C
        return (P * (a - b)) @ self.U.T + b * C, LS

    def _ball(self, C: np.ndarray, gamma: float, eps: float) -> tuple[np.ndarray, np.ndarray,
                                                                        float]:
        """``P = C U`` and the coefficients of ``Lam = (P a) U^T + b R``, ``R = C - P U^T``
        (so ``Lam = (P (a - b)) U^T + b C``): ``a = -1 / (2 gamma s + 2 nu)``,
        ``b = -1 / (2 gamma c + 2 nu)``."""
        P = C @ self.U
        w = np.append(np.einsum("qi,qi->i", P, P), _floor_weight(C, P, self.U))
        den = 2.0 * gamma * np.append(self.s, self.c)
        den = den + secular_root(w, den, eps)  # 2 gamma s + 2 nu
        return P, -1.0 / den[:-1], -1.0 / float(den[-1])

    def project(self, W: np.ndarray, eps: float) -> np.ndarray:
        """:meth:`Metric.project`: ``argmin ||Z - W||_S^2`` s.t. ``||Z||_F^2 <= eps``."""
        if float(np.vdot(W, W)) <= eps:
            return W
        P = W @ self.U
        w = np.append(np.einsum("qi,qi->i", P, P), _floor_weight(W, P, self.U))
        s = np.append(self.s, self.c)
        f = s / (s + secular_root(w * s**2, s, eps))
        return (P * (f[:-1] - f[-1])) @ self.U.T + f[-1] * W


def _floor_weight(C: np.ndarray, P: np.ndarray, U: np.ndarray) -> float:
    """``||R||^2`` for ``R = C - P U^T`` (``P = C U``): ``||C||^2 - ||P||^2`` where that
    loses under a bit to cancellation (:func:`_floor_cheap`), else from ``R`` (one more
    product)."""
    w, ok = _floor_cheap(float(np.vdot(C, C)), float(np.vdot(P, P)))
    if ok:
        return w
    R = C - P @ U.T
    return float(np.vdot(R, R))


def _floor_cheap(cc: float | np.ndarray, pp: float | np.ndarray) -> tuple:
    """``||C||^2 - ||P||^2`` and where it loses under a bit to cancellation (scalars or
    arrays)."""
    w = cc - pp
    return w, w >= 0.5 * cc


# The most ||C||^2 - ||P||^2 can be under ||R||^2 by rounding, as a fraction of ||C||^2
# (rounding gives about d times the unit roundoff): the bound that decides an edge's
# norm bound is inactive without forming R.
_FLOOR_SLACK = 1e-10


class EdgeMetrics:
    """A node's edge metrics and penalties, with the two steps of the edge form's activation
    (:meth:`ball_times`, :meth:`times`) stacked over the edges.

    Each edge is taken as ``S_n = B_n diag(s_n) B_n^T + c_n (I - B_n B_n^T)``: ``B_n = V``,
    ``c_n = 0`` (no floor) for :class:`Metric`, ``B_n = U`` for :class:`LowRankMetric`.
    Where ``d`` is small (:data:`STACK`) the node keeps its edges' bases in one array
    (zero-padded to the widest) and their matrices ``S_n`` side by side, so that each step
    is one product over all edges (``O S_n`` is ``O [S_1 ... S_n]``) and one secular
    equation call (:func:`~dssfn_mpi.ssfn.solver.secular_roots`). Wider edges take their
    steps one edge at a time, on their own bases (no copy; the products of an edge follow
    each other while its basis is in cache). An edge whose norm bound is inactive takes
    ``Lam S = -C / (2 gamma)``, with no product back from its basis.

    Parameters
    ----------
    metrics : sequence of Metric or LowRankMetric
        One per edge, all of the same ``d``.
    gamma : ndarray, shape (n,)
        Each edge's penalty, > 0.
    """

    def __init__(self, metrics, gamma: np.ndarray) -> None:
        g2 = 2.0 * np.asarray(gamma, dtype=float).reshape(-1)
        d = metrics[0].d
        K = max(m.s.shape[0] for m in metrics)
        if d * max(d, K) <= STACK:
            self._groups = [(slice(0, len(metrics)), _EdgeStack(metrics, g2, side=True))]
        else:
            self._groups = [(slice(i, i + 1), _EdgeStack([m], g2[i : i + 1], side=False))
                            for i, m in enumerate(metrics)]
        self._n = len(metrics)
        self._free = np.concatenate([group.free for _, group in self._groups])

    def free(self, C: np.ndarray) -> np.ndarray:
        """:meth:`ball_times` where no edge's norm bound is active: ``-C_n / (2 gamma_n)``."""
        return C * self._free

    def times(self, O: np.ndarray, OB: list | None = None) -> np.ndarray:
        """``O S_n`` for each edge, (n, Q, d); ``OB`` as :meth:`ball_times` returns it."""
        if len(self._groups) == 1:
            return self._groups[0][1].times(O, None if OB is None else OB[0])
        out = np.empty((self._n, *O.shape))
        # The last edges' bases were read last by ball_times: the likeliest still in cache.
        for j in reversed(range(len(self._groups))):
            rows, group = self._groups[j]
            out[rows] = group.times(O, None if OB is None else OB[j])
        return out

    def ball_times(self, C: np.ndarray, eps: float,
                   O: np.ndarray | None = None) -> tuple[np.ndarray, list | None, int]:
        """:meth:`Metric.ball_step`'s ``Lam S`` for each edge, (n, Q, d).

        Parameters
        ----------
        C : ndarray, shape (n, Q, d)
            Each edge's linear term.
        eps : float
            Squared Frobenius bound.
        O : ndarray, shape (Q, d), optional
            Also multiply ``O`` by the edges' bases, in the same pass over each (for
            :meth:`times` of this ``O``).

        Returns
        -------
        (ndarray, list or None, int)
            ``Lam S``; with ``O``, the products to pass to :meth:`times`; the number of
            edges whose norm bound is active.
        """
        if len(self._groups) == 1:
            lam_s, ob, active = self._groups[0][1].ball_times(C, eps, O)
            return lam_s, (None if O is None else [ob]), active
        out, OB, active = np.empty_like(C), [], 0
        for rows, group in self._groups:
            out[rows], ob, act = group.ball_times(C[rows], eps, O)
            OB.append(ob)
            active += act
        return out, (OB if O is not None else None), active


class _EdgeStack:
    """:class:`EdgeMetrics`' steps for some edges, their bases in one (m, d, K) array (a view
    of the edge's own for one edge, else zero-padded copies) and, with ``side``, their
    matrices in one (d, m d) array."""

    def __init__(self, metrics, g2: np.ndarray, side: bool) -> None:
        lows = [isinstance(m, LowRankMetric) for m in metrics]
        bases = [m.U if low else m.V for m, low in zip(metrics, lows)]
        n, K = len(metrics), max(B.shape[1] for B in bases)
        s, self.t = np.ones((n, K)), np.zeros((n, K))  # t = s - c: O S's basis part
        self.c = np.array([m.c if low else 0.0 for m, low in zip(metrics, lows)])
        for i, m in enumerate(metrics):
            s[i, : m.s.shape[0]] = m.s
            self.t[i, : m.s.shape[0]] = m.s - self.c[i]
        # 2 gamma (s, c): the secular equation's shifts (no floor: any shift, weight 0)
        self.den = g2[:, None] * np.hstack([s, np.where(self.c > 0, self.c, 1.0)[:, None]])
        self.free = (-1.0 / g2)[:, None, None]  # Lam S of an inactive bound, over C
        self.floor = np.flatnonzero(lows)
        if n == 1:
            self.B = bases[0][None]
        else:
            self.B = np.zeros((n, bases[0].shape[0], K))
            for i, B in enumerate(bases):
                self.B[i, :, : B.shape[1]] = B
        self.side = np.hstack([m.matrix() for m in metrics]) if side else None

    def times(self, O: np.ndarray, OB: np.ndarray | None) -> np.ndarray:
        """``O S_n`` for each edge: ``(O B_n) diag(s_n - c_n) B_n^T + c_n O`` (``O B_n``
        given, or formed)."""
        if self.side is not None:
            return (O @ self.side).reshape(O.shape[0], len(self.c), -1).transpose(1, 0, 2)
        if OB is None:
            OB = np.matmul(O, self.B)
        return np.matmul(OB * self.t[:, None, :], self.B.transpose(0, 2, 1)) \
            + self.c[:, None, None] * O

    def ball_times(self, C: np.ndarray, eps: float,
                   O: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None, int]:
        """:meth:`EdgeMetrics.ball_times` for these edges (``O B_n``: one product with ``C_n
        B_n`` where :meth:`times` uses it)."""
        OB = None
        if O is None or self.side is not None:
            P = np.matmul(C, self.B)
        else:
            Q = C.shape[1]
            PO = np.matmul(np.concatenate([C, np.broadcast_to(O, C.shape)], axis=1), self.B)
            P, OB = PO[:, :Q], PO[:, Q:]
        n, K = self.t.shape
        w = np.zeros((n, K + 1))
        np.einsum("nqi,nqi->ni", P, P, out=w[:, :K])
        if self.floor.size:
            self._floor_weights(C, P, w, eps)
        nu = secular_roots(w, self.den, eps)
        lam_s = C * self.free
        act = np.nonzero(nu)[0]
        if act.size:
            # Lam S = (P (a s - b c)) B^T + b c C: a = -1 / den, b = -1 / den_floor
            den = self.den[act] + nu[act, None]  # 2 gamma s + 2 nu
            bc = -self.c[act] / den[:, K]
            coef = (self.t[act] + self.c[act, None]) / -den[:, :K] - bc[:, None]
            B = self.B if act.size == n else self.B[act]
            lam_s[act] = (np.matmul(P[act] * coef[:, None, :], B.transpose(0, 2, 1))
                          + bc[:, None, None] * C[act])
        return lam_s, OB, act.size

    def _floor_weights(self, C: np.ndarray, P: np.ndarray, w: np.ndarray, eps: float) -> None:
        """The floor's weights ``||R_n||^2`` into ``w[:, -1]`` (:func:`_floor_weight`'s), with
        no product for ``R`` where the bound is inactive even at its largest value."""
        fl = self.floor
        cc = np.einsum("nqi,nqi->n", C[fl], C[fl])
        wf, ok = _floor_cheap(cc, np.sum(w[fl, :-1], axis=1))
        w[fl, -1] = np.maximum(wf, 0.0) + np.where(ok, 0.0, _FLOOR_SLACK * cc)
        for i in fl[~ok].tolist():
            if float(np.sum(w[i] / self.den[i] ** 2)) > eps:  # may be active: form R
                w[i, -1] = _floor_weight(C[i], P[i], self.B[i])


def _rows_times(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``X @ A`` with a stack ``X`` (..., Q, d) taken as one matrix of rows (one product)."""
    if X.ndim <= 2:
        return X @ A
    rows = X.reshape(int(np.prod(X.shape[:-1])), X.shape[-1])
    return (rows @ A).reshape(X.shape[:-1] + A.shape[1:])


class DenseInverse:
    """Right-multiplication by ``H^-1`` for a symmetric positive definite ``H``.

    The metric forms' local matrix ``2 G_m + sum_n gamma_mn S_mn`` (or ``2 G_m + rho S``)
    is not a Gram plus a multiple of the identity, so the low-rank form of
    :class:`dssfn_mpi.ssfn.solver.LocalInverse` does not apply; the metric is used where ``d``
    is small (the input layer). ``H^-1`` comes from ``H``'s Cholesky factor (LAPACK
    ``dpotrf``, ``dpotri``) and is held as its packed upper triangle, ``d (d + 1) / 2``
    values (half the matrix), applied row by row (BLAS ``dspmv``).
    """

    def __init__(self, H: np.ndarray) -> None:
        d = H.shape[0]
        U, _ = scipy.linalg.cho_factor(0.5 * (H + H.T), overwrite_a=True, check_finite=False)
        inv, info = dpotri(U, overwrite_c=1)  # H^-1's upper triangle, Fortran order
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotri: info {info}")
        self.d = d
        self._tri: np.ndarray | None = inv.T[_lower_indices(d)]  # dspmv's packed upper
        self._full: np.ndarray | None = None

    @property
    def _inv(self) -> np.ndarray:
        """``H^-1`` as a ``d x d`` matrix, for :class:`~dssfn_mpi.ssfn.solver.StackedInverse`
        to stack; the slice it sets in its place is then what the node applies."""
        if self._full is not None:
            return self._full
        full = np.empty((self.d, self.d))
        full.T[_lower_indices(self.d)] = self._tri
        full[_lower_indices(self.d)] = self._tri  # the lower triangle mirrors the upper
        return full

    @_inv.setter
    def _inv(self, value: np.ndarray) -> None:
        self._full, self._tri = value, None

    def apply(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Return ``X @ H^-1`` for ``X`` of shape (Q, d), into ``out`` if given."""
        if self._full is not None:
            return np.matmul(X, self._full, out=out)
        out = np.empty(X.shape) if out is None else out
        for q, x in enumerate(X):
            out[q] = dspmv(self.d, 1.0, self._tri, x)
        return out


@functools.lru_cache(maxsize=4)
def _lower_indices(d: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.tril_indices(d)``, formed once per ``d``."""
    return np.tril_indices(d)


class MetricWoodbury:
    """Right-multiplication by ``H^-1`` for ``H = 2 Y Y^T + rho S``, ``Y`` of rank below ``d / 2``.

    Consensus ADMM's local matrix in its metric ``S``: products by ``S^-1`` are the metric's
    (:meth:`Metric.solve`; one matrix formed once where the nodes share the metric, the
    network mean of the Gram matrices), and each node keeps a ``J x d`` factor of its own,
    through the Woodbury identity in sample space::

        H^-1 = A^-1 - A^-1 Y (I / 2 + Y^T A^-1 Y)^-1 Y^T A^-1,   A = rho S,

    so ``X H^-1 = X A^-1 - (X A^-1 Y) R`` with ``R = (I / 2 + Y^T A^-1 Y)^-1 Y^T A^-1``:
    ``O(Q d^2 + Q d J)`` per call and ``O(d J)`` memory per node instead of ``O(d^2)``.

    Parameters
    ----------
    Y : ndarray, shape (d, J)
        The node's features (kept by reference).
    rho : float
        The penalty, > 0.
    metric : Metric
        ``S``.
    """

    def __init__(self, Y: np.ndarray, rho: float, metric: Metric) -> None:
        if not rho > 0:
            raise ValueError(f"the penalty must be positive, got {rho}")
        self.c, self.metric, self._Y = float(rho), metric, Y
        F = metric.solve(Y.T).T  # S^-1 Y
        K = Y.T @ F
        K[np.diag_indices_from(K)] += 0.5 * self.c
        # R = (I / 2 + Y^T A^-1 Y)^-1 Y^T A^-1 = (rho I / 2 + Y^T S^-1 Y)^-1 Y^T S^-1
        self._R = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K, check_finite=False),
                                         F.T, check_finite=False)
        self._rhs = RhsCache()

    #: :meth:`apply_shifted` applies (consensus ADMM's local step without a product by S).
    shifts = True

    def apply_shifted(self, B2: np.ndarray, D: np.ndarray) -> np.ndarray:
        """``(B2 + rho D S) H^-1``, consensus ADMM's local step, with no product by ``S``:
        ``X A^-1 = B2 S^-1 / rho + D``, ``B2 S^-1`` formed once for the ``B2`` a layer's
        iterations reuse. ``O(Q d J)`` per call."""
        XA = self._rhs.get(B2, lambda b: self.metric.solve(b) / self.c) + D
        return XA - (XA @ self._Y) @ self._R

    def apply(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Return ``X @ H^-1`` for ``X`` of shape (..., Q, d), into ``out`` if given."""
        XA = self.metric.solve(X)
        XA /= self.c
        return np.subtract(XA, (XA @ self._Y) @ self._R, out=out)
