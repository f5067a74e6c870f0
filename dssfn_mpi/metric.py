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
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .solver import RhsCache, secular_root

__all__ = ["Metric", "DenseInverse", "MetricWoodbury", "gram_metric", "RIDGE"]

# The metric is a Gram matrix plus RIDGE times its mean eigenvalue: the input layer's Gram
# can be singular (digits has constant pixels), and S must be positive definite. 1e-3 is
# the value of the layer-0 measurements in docs/ALGORITHMS.md; the fixed point does not
# depend on it.
RIDGE = 1e-3


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
    S = np.mean(np.stack(grams), axis=0)
    S = 0.5 * (S + S.T)
    d = S.shape[0]
    scale = float(np.trace(S)) / d
    S[np.diag_indices(d)] += RIDGE * scale if scale > 0 else 1.0
    return S


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
        """
        CV = C @ self.V
        w = np.einsum("qi,qi->i", CV, CV)
        den = 2.0 * gamma * self.s
        den = den + secular_root(w, den, eps)  # 2 gamma s + 2 nu
        LV = CV / -den
        return LV @ self.V.T, (LV * self.s) @ self.V.T

    def project(self, W: np.ndarray, eps: float) -> np.ndarray:
        """``argmin ||Z - W||_S^2`` s.t. ``||Z||_F^2 <= eps`` (``W`` itself when inside)."""
        if float(np.vdot(W, W)) <= eps:
            return W
        WV = W @ self.V
        w = np.einsum("qi,qi->i", WV, WV)
        nu = secular_root(w * self.s**2, self.s, eps)
        return (WV * (self.s / (self.s + nu))) @ self.V.T


def _rows_times(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``X @ A`` with a stack ``X`` (..., Q, d) taken as one matrix of rows (one product)."""
    if X.ndim <= 2:
        return X @ A
    return (X.reshape(-1, X.shape[-1]) @ A).reshape(X.shape[:-1] + A.shape[1:])


class DenseInverse:
    """Right-multiplication by ``H^-1`` for a symmetric positive definite ``H`` (Cholesky).

    The metric forms' local matrix ``2 G_m + sum_n gamma_mn S_mn`` (or ``2 G_m + rho S``)
    is not a Gram plus a multiple of the identity, so the low-rank form of
    :class:`dssfn_mpi.solver.LocalInverse` does not apply; the metric is used where ``d``
    is small (the input layer).
    """

    def __init__(self, H: np.ndarray) -> None:
        d = H.shape[0]
        cf = scipy.linalg.cho_factor(0.5 * (H + H.T), check_finite=False)
        self._inv = scipy.linalg.cho_solve(cf, np.eye(d), check_finite=False)

    def apply(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Return ``X @ H^-1`` for ``X`` of shape (Q, d), into ``out`` if given."""
        return np.matmul(X, self._inv, out=out)


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
