"""The convex problem of one SSFN layer, solved exactly or by the authors' ADMM.

Layer problem (docs/ALGORITHMS.md section 2)::

    min_O ||T - O Y||_F^2   s.t.  ||O||_F^2 <= eps

written through its sufficient statistics ``G = Y Y^T`` and ``B = T Y^T``: the
objective is ``||T||^2 - 2 tr(O B^T) + tr(O G O^T)``. The KKT conditions are
``O (G + lam I) = B``, ``lam >= 0``, ``lam (||O||^2 - eps) = 0``, so the exact
solution is a one-dimensional root in the multiplier ``lam``.

:class:`LocalInverse` applies ``(2 G_m + c I)^{-1}`` from the right, the one
expensive step of every decentralized activation, densely or through the
Woodbury identity when a node holds fewer samples than features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

__all__ = [
    "AUTO_EDGE",
    "AUTO_FLOOR",
    "AUTO_SYNC",
    "AUTO_METRIC_EDGE",
    "AUTO_METRIC_SYNC",
    "METRIC_DATA_EDGE",
    "METRIC_DATA_SYNC",
    "metric_penalty",
    "width_ratio",
    "AUTHORS_ADMM_ITERS",
    "ExactSolution",
    "auto_penalty",
    "edge_penalties",
    "gram_top_eigenvalue",
    "local_multiplier",
    "penalty_stats",
    "LocalInverse",
    "admm_solve",
    "exact_solve",
    "exact_solve_data",
    "kkt_residual",
    "objective",
    "project_frobenius",
    "secular_root",
    "secular_roots",
]


def project_frobenius(O: np.ndarray, eps: float) -> np.ndarray:
    """Project ``O`` onto the ball ``||O||_F^2 <= eps``.

    Parameters
    ----------
    O : ndarray
        Any matrix.
    eps : float
        Squared radius of the ball, > 0.

    Returns
    -------
    ndarray
        ``O`` itself when it is inside the ball, else a rescaled copy.
    """
    norm = float(np.linalg.norm(O))
    radius = float(np.sqrt(eps))
    if norm <= radius:
        return O
    return O * (radius / norm)


def objective(O: np.ndarray, G: np.ndarray, B: np.ndarray, tt: float) -> float:
    """Least-squares cost ``||T - O Y||_F^2`` from the statistics.

    Parameters
    ----------
    O : ndarray, shape (Q, d)
    G : ndarray, shape (d, d)
        ``Y Y^T``.
    B : ndarray, shape (Q, d)
        ``T Y^T``.
    tt : float
        ``||T||_F^2``.

    Returns
    -------
    float
    """
    return float(tt - 2.0 * np.vdot(O, B) + np.vdot(O @ G, O))


def kkt_residual(O: np.ndarray, lam: float, G: np.ndarray, B: np.ndarray, eps: float) -> float:
    """Relative KKT residual of ``(O, lam)`` for the layer problem.

    The largest of stationarity ``||O (G + lam I) - B|| / ||B||``, primal
    infeasibility ``max(0, ||O||^2 - eps) / eps``, dual infeasibility
    ``max(0, -lam)`` and complementarity ``lam |eps - ||O||^2| / (eps * scale)``
    with ``scale`` the largest eigenvalue of ``G``.
    """
    bnorm = max(float(np.linalg.norm(B)), np.finfo(float).tiny)
    stat = float(np.linalg.norm(O @ G + lam * O - B)) / bnorm
    sq = float(np.vdot(O, O))
    primal = max(0.0, sq - eps) / eps
    scale = max(float(np.linalg.norm(G, 2)), np.finfo(float).tiny)
    comp = lam * abs(eps - sq) / (eps * scale)
    return max(stat, primal, max(0.0, -lam), comp)


@dataclass(frozen=True)
class ExactSolution:
    """Exact minimiser of a layer problem and its multiplier."""

    O: np.ndarray
    lam: float


def secular_root(a: np.ndarray, den: np.ndarray, eps: float) -> float:
    """Smallest ``nu >= 0`` with ``q(nu) = sum_i a_i / (den_i + nu)^2 <= eps``.

    The one-row case of :func:`secular_roots` (the method is described there).

    Parameters
    ----------
    a : ndarray
        Non-negative weights.
    den : ndarray
        Positive shifts, the shape of ``a``.
    eps : float
        The bound, positive.

    Returns
    -------
    float
        The multiplier ``nu``.
    """
    return float(secular_roots(np.reshape(a, (1, -1)), np.reshape(den, (1, -1)), eps)[0])


def secular_roots(a: np.ndarray, den: np.ndarray, eps: float) -> np.ndarray:
    """Row by row, the smallest ``nu >= 0`` with ``q(nu) = sum_i a_i / (den_i + nu)^2 <= eps``.

    ``q`` decreases in ``nu``, so each answer is 0 or the single root of ``q(nu) = eps``,
    below ``sqrt(sum_i a_i / eps)``. The root is found by Newton's method on
    ``phi(nu) = q(nu)^(-1/2) - eps^(-1/2)``, which is increasing and concave (the secular
    equation of a trust-region step): from ``nu = 0``, where ``phi < 0``, every step stays
    below the root and the steps shrink quadratically. A row stops at its first step of at
    most a few units in the last place of ``nu`` (or one that rounding turned back); the
    rows still iterating are stepped together.

    Parameters
    ----------
    a : ndarray, shape (n, k)
        Non-negative weights, one equation per row (a zero weight adds no term).
    den : ndarray, shape (n, k)
        Positive shifts.
    eps : float
        The bound, positive.

    Returns
    -------
    ndarray, shape (n,)
        The multipliers ``nu``.
    """
    nu = np.zeros(a.shape[0])
    rows = np.nonzero((a / den**2).sum(axis=1) > eps)[0]
    if not rows.size:
        return nu
    a, den = a[rows], den[rows]
    hi = np.sqrt(a.sum(axis=1) / eps)
    x, tol = np.zeros(rows.size), 4.0 * np.finfo(float).eps
    for _ in range(100):
        r = 1.0 / (den + x[:, None])
        t = a * r * r
        q = np.sum(t, axis=1)
        step = q * (np.sqrt(q / eps) - 1.0) / np.sum(t * r, axis=1)  # -phi / phi'
        done = ~(step > tol * x)
        nu[rows[done]] = np.maximum(x[done], x[done] + step[done])
        go = ~done
        rows, a, den, hi = rows[go], a[go], den[go], hi[go]
        x = np.minimum(x[go] + step[go], hi)
        if not rows.size:
            break
    nu[rows] = x
    return nu


def _solve_spectral(C: np.ndarray, s: np.ndarray, U: np.ndarray, eps: float) -> ExactSolution:
    """Exact solution given ``G = U diag(s) U^T`` (s > 0) and ``C = B U``.

    ``||O(lam)||^2 = sum_i ||C[:, i]||^2 / (s_i + lam)^2`` decreases in lam: its
    multiplier is :func:`secular_root`'s.
    """
    lam = secular_root(np.einsum("qi,qi->i", C, C), s, eps)
    O = (C / (s + lam)) @ U.T
    return ExactSolution(O=O, lam=float(lam))


def _positive_part(s: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop numerically-zero eigenvalues (B has no component there)."""
    tol = float(s.max(initial=0.0)) * max(U.shape) * np.finfo(float).eps
    keep = s > tol
    return s[keep], U[:, keep]


def exact_solve(G: np.ndarray, B: np.ndarray, eps: float) -> ExactSolution:
    """Exact solution of the layer problem from ``G = Y Y^T`` and ``B = T Y^T``.

    Parameters
    ----------
    G : ndarray, shape (d, d)
        Symmetric positive semi-definite Gram matrix.
    B : ndarray, shape (Q, d)
        Cross term.
    eps : float
        Squared Frobenius bound, > 0.

    Returns
    -------
    ExactSolution
        ``O`` (Q x d) and the multiplier ``lam`` (0 when the minimum-norm
        least-squares solution already satisfies the bound).
    """
    s, U = scipy.linalg.eigh(G, check_finite=False)
    s, U = _positive_part(s, U)
    return _solve_spectral(B @ U, s, U, eps)


def exact_solve_data(Y: np.ndarray, T: np.ndarray, eps: float) -> ExactSolution:
    """Exact solution from the data itself, via the thin SVD when ``J < d``.

    Parameters
    ----------
    Y : ndarray, shape (d, J)
        Features, one column per sample.
    T : ndarray, shape (Q, J)
        Targets.
    eps : float
        Squared Frobenius bound, > 0.

    Returns
    -------
    ExactSolution
    """
    d, J = Y.shape
    if J >= d:
        return exact_solve(Y @ Y.T, T @ Y.T, eps)
    U, sv, Vt = scipy.linalg.svd(Y, full_matrices=False, check_finite=False)
    s, U = _positive_part(sv**2, U)
    keep = s.size
    # B U = T Y^T U = T V S: never forms the d x d Gram matrix.
    C = (T @ Vt[:keep].T) * sv[:keep]
    return _solve_spectral(C, s, U, eps)


# Iterations of the SSFN authors' ADMM (their code's default).
AUTHORS_ADMM_ITERS = 100


def admm_solve(G: np.ndarray, B: np.ndarray, eps: float, mu: float, iters: int) -> np.ndarray:
    """The SSFN authors' ADMM for the layer problem (for reproducing the paper).

    Their ``optimize_O`` in the statistics of this module (``G = Y Y^T``,
    ``B = T Y^T``, unscaled as in their code)::

        O = (B + (Zc + D) / mu) (G + I / mu)^-1;  Zc = P_eps(O - D);  D = D + Zc - O

    from ``Zc = D = 0``, returning the last ``O`` as their code does; ``P_eps``
    projects onto ``||.||_F <= sqrt(eps)`` (their ``alpha sqrt(2Q)``). With
    few iterations and a large ``mu`` that ``O`` is not the constrained
    optimum and need not be feasible (BENCHMARKS.md: training cost 1.9 - 3.3x
    below the constrained minimum on letter, mnist and satimage): never use
    it as the equivalence target. This is the only implementation:
    :func:`dssfn_mpi.ssfn.central.solve_layer` calls it for the library and for
    ``--mode central --central-solver admm``.

    Parameters
    ----------
    G, B : ndarray
        Statistics as in :func:`exact_solve`.
    eps : float
        Squared Frobenius bound.
    mu : float
        The authors' ``myu`` (> 0).
    iters : int
        Iteration count (the authors use :data:`AUTHORS_ADMM_ITERS`).

    Returns
    -------
    ndarray, shape (Q, d)
    """
    rho = 1.0 / mu
    d = G.shape[0]
    inv = scipy.linalg.inv(G + rho * np.eye(d), check_finite=False)
    Zc = np.zeros_like(B)
    D = np.zeros_like(B)
    O = Zc
    for _ in range(iters):
        O = (B + rho * (Zc + D)) @ inv
        Zc = project_frobenius(O - D, eps)
        D = D + Zc - O
    return O


class LocalInverse:
    """Right-multiplication by ``(2 G + c I)^{-1}`` with ``G = Y Y^T``.

    Dense when the node holds at least half as many samples as features
    (one ``Q x d x d`` product per call); otherwise the Woodbury identity
    ``(2 Y Y^T + c I)^{-1} = (I - Y (c/2 I + Y^T Y)^{-1} Y^T) / c`` costs
    ``O(Q d J)`` per call instead.

    Parameters
    ----------
    Y : ndarray, shape (d, J)
        The node's features.
    c : float
        Positive diagonal shift (``gamma * degree`` or ``rho``).
    G : ndarray, optional
        ``Y Y^T`` if the caller already has it.
    """

    def __init__(self, Y: np.ndarray, c: float, G: np.ndarray | None = None) -> None:
        if not c > 0:
            raise ValueError(f"diagonal shift must be positive, got {c}")
        d, J = Y.shape
        self.c = float(c)
        self.low_rank = 2 * J < d
        if self.low_rank:
            K = Y.T @ Y
            K[np.diag_indices_from(K)] += self.c / 2.0
            self._Y = Y
            # A = K^{-1} Y^T, so x H^{-1} = (x - (x Y) A) / c.
            self._A = scipy.linalg.cho_solve(
                scipy.linalg.cho_factor(K, check_finite=False), Y.T, check_finite=False
            )
        else:
            H = 2.0 * (Y @ Y.T if G is None else G)
            H[np.diag_indices_from(H)] += self.c
            cf = scipy.linalg.cho_factor(H, check_finite=False)
            self._inv = scipy.linalg.cho_solve(cf, np.eye(d), check_finite=False)

    def apply(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Return ``X @ (2 G + c I)^{-1}`` for ``X`` of shape (Q, d), into ``out`` if given.

        ``out`` (C-contiguous, not overlapping ``X``) spares the async engine an
        allocation per activation.
        """
        if self.low_rank:
            return np.divide(X - (X @ self._Y) @ self._A, self.c, out=out)
        return np.matmul(X, self._inv, out=out)


# ``auto`` penalties, from each node's [lam_m, s_m, g_m] (:func:`penalty_stats`): its own
# multiplier, the mean nonzero and the largest eigenvalue of G_m. Both ADMMs need about
# A / penalty + B * penalty iterations to a given accuracy: a small penalty is slow to
# agree (A grows with the curvature where the nodes differ and falls with the graph's
# connectivity), a large one slow to move the agreed value along the flattest direction
# (B grows with the degree and falls with the low end of the curvature, lam). The best
# penalty, sqrt(A / B), is the geometric mean of the two ends of the per-node curvature,
# over sqrt(d lambda_2) on a graph (Shi, Ling, Yuan, Wu, Yin, IEEE TSP 2014, for
# decentralized ADMM):
#
#     async, edge (m, n):  gamma_mn = AUTO_EDGE * sqrt(lam sqrt(g s) / (d lambda_2))
#     sync, sync-graph:    rho      = AUTO_SYNC * sqrt(lam s)
#
# lam, s, g the means of lam_m, s_m, g_m over the edge's two ends (async) or over all
# nodes (sync), d the graph's mean degree, lambda_2 its Laplacian's algebraic
# connectivity. The high end is s for consensus ADMM, whose exact average agrees at once
# along the features' common direction (the top eigenvector), and sqrt(g s) for the edge
# form, whose nodes must also agree along it. Fitted on activations (iterations) to 1e-2
# of O* with fresh reads (dssfn_mpi/bench/studies/penalty.py's steps) at layers 1, 3, 5 of
# digits, satimage, vowel and letter on the ring of 4 and of 20, the circular graph
# M = 20, d = 8, the complete graph M = 8 and a random 3-regular graph M = 16 (sync:
# M = 4, 8, 16, 20): the best constant penalty of every case lies within 1.9x (async)
# and 2x (sync) of the rule, whose count is within 1.4x of the best count
# (docs/ALGORITHMS.md, "The auto penalty", has the simulator's table; the rules it
# replaced are in docs/HISTORY.md, "Penalties").
AUTO_EDGE = 2.8
AUTO_SYNC = 5.0
# When lam* is 0 or tiny (the deepest layers) fall back to the data's scale: the mean
# nonzero eigenvalue of G_m. At digits' layer 20 (lam* = 0.012, M = 20, d = 8) async's
# gamma is this floor on most edges and the best constant multiplier in hindsight
# (docs/ALGORITHMS.md, "The deepest layers").
AUTO_FLOOR = 0.02
#: Power iterations behind g_m: the top eigenvalue of a Gram matrix of non-negative
#: features is well separated, so this is within a few per cent (a rough value is enough).
POWER_ITERS = 30
# The metric forms (--metric gram, the input layer; dssfn_mpi/ssfn/metric.py) have penalties in
# units of the metric, S ~ a node's Gram matrix, so the data enter them only through the
# samples per node (below). Consensus ADMM: rho = AUTO_METRIC_SYNC, the best of rho in
# 0.1 .. 4 on digits and satimage (M = 20: 23 and 12 iterations to 1e-2 of O*, against 1426
# and 138 for the best scalar rho). Edge form: gamma_mn = AUTO_METRIC_EDGE / sqrt(d_mn
# lambda_2), d_mn the mean degree of the edge's ends and lambda_2 the graph's algebraic
# connectivity. The activations to a tolerance fall as 1 / (gamma lambda_2) while the graph
# limits them and grow as gamma d once the penalty outweighs the data, so the best gamma goes
# as 1 / sqrt(d lambda_2); 2.2 is the fit on rings of 4 and 20 nodes, the circular graph
# M = 20, d = 8, the complete graph M = 8 and a random-regular graph d = 3, M = 16 (digits
# and satimage, round-robin activations): within 1.3x of the best gamma's count on each.
AUTO_METRIC_SYNC = 2.0
AUTO_METRIC_EDGE = 2.2
# Both grow with n / J, the input width over the mean samples per node: a node with fewer
# samples than inputs has a Gram matrix of rank J_m, far from the metric (in the metric's
# whitened coordinates its curvature spans 0 to about (1 + sqrt(n / J))^2), so the nodes'
# problems differ more and a stronger pull to agreement pays; the large-penalty end, set by
# the data's flattest directions in the metric, does not move with M. The powers of
# (1 + n / J) are the fit on satimage, digits and mnist at M = 20 - 256 (J = 4.7 - 3000
# samples per node), on the ring and the circular graph d = 8 (docs/ALGORITHMS.md, "The
# input layer's penalty across node counts"). At n / J -> 0 the rules are the M = 20 ones.
METRIC_DATA_SYNC = 0.5
METRIC_DATA_EDGE = 0.6


def local_multiplier(Y: np.ndarray, T: np.ndarray, eps: float) -> float:
    """Estimate of the multiplier of a node's own layer problem (its data alone).

    Exact (thin SVD, ``O(d J^2)``) while the node holds at most ``d / 4``
    samples. Beyond that a strided subset of ``s = d / 4`` samples stands in
    for the shard: ``G`` and ``B`` scale with the sample count, so the subset's
    multiplier times ``J / s`` estimates the shard's at ``1/16`` of the cost of
    an eigendecomposition. A rough value is all :func:`auto_penalty` needs.
    """
    d, J = Y.shape
    s = max(d // 4, 1)
    if J <= s:
        return exact_solve_data(Y, T, eps).lam
    cols = np.linspace(0, J - 1, s).astype(np.int64)
    return exact_solve_data(Y[:, cols], T[:, cols], eps).lam * (J / s)


def gram_top_eigenvalue(Y: np.ndarray, G: np.ndarray | None = None) -> float:
    """Largest eigenvalue of ``G = Y Y^T`` by :data:`POWER_ITERS` power iterations.

    Through ``G`` when given and smaller than ``Y`` (``d <= J``), else through ``Y``;
    started from the ones vector, so every rank gets the same value for the same data.
    """
    d, J = Y.shape
    v = np.ones(d) / np.sqrt(max(d, 1))
    top = 0.0
    use_G = G is not None and d <= J
    for _ in range(POWER_ITERS):
        w = G @ v if use_G else Y @ (Y.T @ v)
        top = float(np.linalg.norm(w))
        if top == 0.0:
            return 0.0
        v = w / top
    return top


def penalty_stats(Y: np.ndarray, T: np.ndarray, G: np.ndarray | None, eps: float) -> np.ndarray:
    """A node's ``[lam_m, s_m, g_m]`` behind the ``auto`` penalty (:func:`auto_penalty`).

    ``lam_m`` its own multiplier (:func:`local_multiplier`), ``s_m`` the mean
    nonzero eigenvalue of ``G_m`` (a shard with ``J_m < d`` samples has rank
    ``J_m``), ``g_m`` its largest (:func:`gram_top_eigenvalue`).
    """
    trace = float(np.einsum("ij,ij->", Y, Y))
    return np.array([local_multiplier(Y, T, eps), trace / min(Y.shape),
                     gram_top_eigenvalue(Y, G)])


def auto_penalty(
    mean_stats: np.ndarray,
    consensus: bool,
    degree: float = 1.0,
    connectivity: float = 1.0,
) -> float:
    """ADMM penalty from averages of the nodes' :func:`penalty_stats`.

    The rules and what they were fitted on are next to the constants
    (``AUTO_EDGE``, ``AUTO_SYNC``); every rank that must agree on the value
    passes the same numbers.

    Parameters
    ----------
    mean_stats : array of 3 floats
        Means of ``[lam_m, s_m, g_m]``: over all nodes (sync), over the
        edge's two ends (async).
    consensus : bool
        True for consensus ADMM's rho (``AUTO_SYNC * sqrt(lam s)``), False
        for the edge form's gamma (``AUTO_EDGE * sqrt(lam sqrt(g s) / (d lambda_2))``);
        both at least ``AUTO_FLOOR * s``.
    degree, connectivity : float
        The edge form's graph: its mean degree and the algebraic connectivity
        of its Laplacian (:attr:`dssfn_mpi.graph.topology.Graph.algebraic_connectivity`).

    Returns
    -------
    float
    """
    lam, scale, top = (max(float(x), 0.0) for x in mean_stats)
    if consensus:
        value = AUTO_SYNC * np.sqrt(lam * scale)
    else:
        graph = max(degree * connectivity, 1e-12)
        value = AUTO_EDGE * np.sqrt(lam * np.sqrt(scale * top) / graph)
    return float(max(value, AUTO_FLOOR * scale, 1e-12))


def edge_penalties(mine: np.ndarray, theirs: Sequence[np.ndarray] | np.ndarray,
                   graph) -> np.ndarray:
    """A node's ``auto`` gamma_mn, one per neighbour, from the means over each edge's two ends.

    Parameters
    ----------
    mine : array of 3 floats
        The node's own :func:`penalty_stats`.
    theirs : array (degree, 3), or one array of 3 per neighbour
        Its neighbours' statistics, in the order of ``graph.neighbors(m)``.
    graph : dssfn_mpi.graph.topology.Graph
        The run's graph (its mean degree and algebraic connectivity enter the rule).

    Returns
    -------
    ndarray
        One gamma per neighbour; both ends of an edge get the same value.
    """
    pair = 0.5 * (np.asarray(theirs, dtype=float) + mine)
    degree, l2 = float(graph.degrees.mean()), graph.algebraic_connectivity
    return np.array([auto_penalty(p, False, degree, l2) for p in pair])


def width_ratio(width: int, shard_sizes: Sequence[int]) -> float:
    """``n / J``: a layer's width over the mean samples per node (the metric penalty's data
    term, :func:`metric_penalty`; every rank knows the shard sizes)."""
    return float(width) * len(shard_sizes) / max(float(np.sum(shard_sizes)), 1.0)


def metric_penalty(consensus: bool, degree: float = 1.0, connectivity: float = 1.0,
                   ratio: float = 0.0) -> float:
    """The ``auto`` penalty of the metric forms (``--metric gram``, the input layer).

    Parameters
    ----------
    consensus : bool
        True for consensus ADMM's rho, ``AUTO_METRIC_SYNC (1 + n / J)^0.5``, False for an
        edge's gamma, ``AUTO_METRIC_EDGE (1 + n / J)^0.6 / sqrt(degree * connectivity)``
        (:data:`METRIC_DATA_SYNC`, :data:`METRIC_DATA_EDGE`).
    degree : float
        The mean degree of the edge's two ends (edge form).
    connectivity : float
        The graph's algebraic connectivity ``lambda_2`` (edge form), > 0 on a connected graph.
    ratio : float
        ``n / J``, the layer's width over the mean samples per node (:func:`width_ratio`).

    Returns
    -------
    float
    """
    data = 1.0 + max(float(ratio), 0.0)
    if consensus:
        return float(AUTO_METRIC_SYNC * data**METRIC_DATA_SYNC)
    return float(AUTO_METRIC_EDGE * data**METRIC_DATA_EDGE
                 / np.sqrt(max(degree * connectivity, 1e-12)))


class RhsCache:
    """``f(B2)`` of the one right-hand side ``B2`` a layer's iterations reuse: formed again
    only for another array (its data, shape or strides; the array is kept meanwhile, so its
    memory cannot be reused by another)."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._ref: np.ndarray | None = None
        self._value: np.ndarray | None = None

    def get(self, B2: np.ndarray, f: Any) -> np.ndarray:
        """``f(B2)``, formed on the first call for this ``B2``."""
        key = (B2.__array_interface__["data"][0], B2.shape, B2.strides)
        if key != self._key:
            self._key, self._ref, self._value = key, B2, f(B2)
        return self._value


class StackedInverse:
    """Every node's local inverse applied at once to stacked right-hand sides.

    The nodes' factors move into stacks (one per kind and shape: the low-rank
    :class:`LocalInverse` of each sample count, the dense ones, the
    :class:`~dssfn_mpi.ssfn.metric.MetricWoodbury` of each sample count in one shared metric),
    and each node's inverse then reads its slice of them, so memory is not doubled.
    :meth:`apply` runs each node's own arithmetic on its slice, as a batched product over
    the stack.

    Parameters
    ----------
    invs : list of LocalInverse, DenseInverse or MetricWoodbury
        One per node, in node order.
    """

    def __init__(self, invs: Sequence[Any]) -> None:
        shapes: dict[tuple, list[int]] = {}
        for m, inv in enumerate(invs):
            kind, names = _stack_kind(inv)
            shapes.setdefault((kind, getattr(inv, names[0]).shape), []).append(m)
        self.nodes = len(invs)
        self._groups = []
        self._rhs = RhsCache()
        for (kind, _), members in shapes.items():
            idx = np.asarray(members)
            if idx[-1] - idx[0] + 1 == idx.size:
                idx = slice(int(idx[0]), int(idx[-1]) + 1)
            first = invs[members[0]]
            c = np.array([invs[m].c for m in members]).reshape(-1, 1, 1) if kind[0] else None
            names = _stack_kind(first)[1]
            stacks = [np.stack([getattr(invs[m], n) for m in members]) for n in names]
            for i, m in enumerate(members):  # each node's inverse reads its slice
                for n, stack in zip(names, stacks):
                    setattr(invs[m], n, stack[i])
            shared = first.metric if kind[0] == "metric" else None
            self._groups.append((idx, kind[0], c, stacks, shared))

    @property
    def shifts(self) -> bool:
        """Whether :meth:`apply_shifted` applies (every node's inverse Woodbury's in a metric)."""
        return all(kind == "metric" for _, kind, *_ in self._groups)

    def apply_shifted(self, B2: np.ndarray, D: np.ndarray) -> np.ndarray:
        """Every node's :meth:`~dssfn_mpi.ssfn.metric.MetricWoodbury.apply_shifted` at once:
        ``(B2[m] + c_m D[m] S) H_m^-1`` (``B2``, ``D`` of shape (M, Q, d))."""
        BS = self._rhs.get(B2, self._scaled_solve)
        out = np.empty(D.shape)
        for idx, _, _, (Y, R), _ in self._groups:
            XA = BS[idx] + D[idx]
            out[idx] = XA - (XA @ Y) @ R
        return out

    def _scaled_solve(self, B2: np.ndarray) -> np.ndarray:
        out = np.empty(B2.shape)
        for idx, _, c, _, metric in self._groups:
            out[idx] = metric.solve(B2[idx]) / c
        return out

    @staticmethod
    def stackable(inv: Any) -> bool:
        """Whether ``inv`` is of a kind :class:`StackedInverse` stacks."""
        return hasattr(inv, "_inv") or hasattr(inv, "low_rank") or hasattr(inv, "metric")

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Return ``X[m] @ H_m^-1`` for every node m: ``X`` has shape (M, Q, d)."""
        out = np.empty_like(X)
        for idx, kind, c, stacks, shared in self._groups:
            Xg = X[idx]
            if kind == "low-rank":
                Y, A = stacks
                out[idx] = (Xg - (Xg @ Y) @ A) / c
            elif kind == "metric":
                Y, R = stacks
                XA = shared.solve(Xg)
                XA /= c
                out[idx] = XA - (XA @ Y) @ R
            else:
                out[idx] = Xg @ stacks[0]
        return out


def _stack_kind(inv: Any) -> tuple[tuple, tuple[str, ...]]:
    """How a node's inverse stacks: its kind (with the metric it shares) and the names of
    its per-node arrays."""
    if hasattr(inv, "metric"):  # MetricWoodbury
        return ("metric", id(inv.metric)), ("_Y", "_R")
    if getattr(inv, "low_rank", False):
        return ("low-rank",), ("_Y", "_A")
    return ("",), ("_inv",)
