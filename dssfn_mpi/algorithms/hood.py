"""Neighbourhood consensus ADMM, asynchronous (ARock; ``--mode hood``).

One consensus variable per closed neighbourhood ``H_j = {j} + N(j)``, owned by its centre
``j``; node i belongs to the ``d_i + 1`` neighbourhoods ``C_i = {i} + N(i)``::

    min sum_i f_i(x_i)  s.t.  x_i = z_j (j in C_i),  ||z_j||_F^2 <= eps

with ``f_i(O) = ||T_i - O Y_i||^2`` and the penalty ``rho_ij`` on the constraint
``x_i = z_j``; ``rho_ij = rho_ji``, so each end of an edge holds the weight of the other's
membership of its own neighbourhood. Scaled ADMM as a Douglas-Rachford fixed-point
iteration on the pair state ``v_ij = x_i + u_ij`` (owned by member i)::

    z_j   = P_eps(sum_{i in H_j} rho_ij v_ij / sum_{i in H_j} rho_ij)
    x_i   = (2 B_i + sum_{j in C_i} rho_ij (2 z_j - v_ij)) (2 G_i + sum_j rho_ij I)^-1
    v_ij += eta (x_i - z_j)

(``eta`` in (0, 2) the relaxation, 1 plain ADMM). An activation of node i, as centre,
forms ``z_i`` from the latest ``v_ki`` in its window and its own ``v_ii``; as member it uses
the latest ``z_j`` of each neighbour and its own ``z_i``, computes ``x_i``, updates its
``v_ij`` and puts one message ``[v_ij, z_i]`` (two ``Q x d`` blocks) to each neighbour j.
docs/ALGORITHMS.md, section "Neighbourhood consensus".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..drivers import ONE_SIDED, Driver
from ..ssfn.metric import Metric, gram_metric
from ..ssfn.solver import auto_penalty, metric_penalty, project_frobenius
from .base import Algorithm

__all__ = ["AUTO_HOOD_GRAPH", "HoodStep", "MetricHoodStep", "NeighbourhoodADMM"]

#: The ``auto`` penalties grow as ``max(1, AUTO_HOOD_GRAPH / sqrt(lambda_2))`` on graphs of
#: small algebraic connectivity ``lambda_2``: information crosses a sparse graph slowly, and a
#: stronger pull to the neighbourhood variables pays. Fitted on satimage, M = 20, layers 1 - 2
#: (docs/ALGORITHMS.md section 10): the best multiplier of the plain rule was 2 - 4 on the
#: ring (lambda_2 = 0.098), 1 - 2 at d = 8 (2.7) and 1 on the complete graph (20).
AUTO_HOOD_GRAPH = 1.0


class HoodStep:
    """One node's neighbourhood-consensus activation for one layer (the one-sided step).

    Parameters
    ----------
    B2 : ndarray, shape (Q, d)
        ``2 B_i``.
    rho : ndarray, shape (d_i + 1,)
        ``rho_ii`` first, then ``rho_ij`` for its neighbours j in the order of
        ``graph.neighbors(i)`` (``rho_ij = rho_ji``: the same at both ends).
    eta : float
        Relaxation in (0, 2).
    eps : float
        Squared Frobenius bound.
    inv : LocalInverse
        ``(2 G_i + sum_j rho_ij I)^-1``.
    store : tuple (ndarray, int), optional
        Where :attr:`Z` (the outgoing messages) lives: ``d_i`` rows of at least
        ``offset + 2 Q d`` float64 (the mailbox's outbox). Default: an array of its own.

    Attributes
    ----------
    Z : ndarray, shape (d_i, 2 Q, d)
        The message to each neighbour j: ``[v_ij; z_i]`` stacked.
    O : ndarray, shape (Q, d)
        ``x_i`` of the last activation.
    v_own : ndarray, shape (Q d,)
        ``v_ii``, flat.
    z : ndarray, shape (Q d,)
        ``z_i`` of the last activation, flat.
    """

    def __init__(self, B2: np.ndarray, rho: np.ndarray, eta: float, eps: float, inv: Any,
                 store: tuple[np.ndarray, int] | None = None) -> None:
        rho = np.asarray(rho, dtype=float).reshape(-1)
        Q, d = B2.shape
        dm, self._size = rho.size - 1, Q * d
        if store is None:
            store = (np.zeros((dm, 2 * self._size)), 0)
        buf, off = store
        if (buf.dtype != np.float64 or not buf.flags.c_contiguous or buf.shape[0] != dm
                or buf.shape[1] < off + 2 * self._size):
            raise ValueError(f"store must be C-contiguous float64 with {dm} rows of at least "
                             f"{off + 2 * self._size} values")
        flat = buf[:, off: off + 2 * self._size]
        flat[...] = 0.0
        self.Z = flat.reshape(dm, 2 * Q, d)
        self._v = flat[:, : self._size]  # v_ij for each neighbour j
        self._zout = flat[:, self._size:]  # z_i, the same in every row
        self.v_own = np.zeros(self._size)
        self.z = np.zeros(self._size)
        self.O = np.zeros((Q, d))
        self._rhs = np.empty((Q, d))
        self._b2 = np.asarray(B2, dtype=float).reshape(-1)
        self._rho, self._eta, self._eps, self.inv = rho, float(eta), float(eps), inv
        self._total = float(rho.sum())

    @property
    def rhs_buffer(self) -> np.ndarray:
        """The last activation's right-hand side of ``x_i``."""
        return self._rhs

    def step_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """One activation given each neighbour j's message ``[v_ji, z_j]`` as the row
        ``table[rows[k], :2 Q d]`` (zeros for one that has not written); returns :attr:`O`."""
        size = self._size
        if len(rows) != self._rho.size - 1:
            raise ValueError(f"{len(rows)} neighbour values for {self._rho.size - 1} "
                             "neighbours")
        msgs = table[np.asarray(rows, dtype=np.intp), : 2 * size]
        self.centre(msgs[:, :size])
        self.member(msgs[:, size:])
        self._zout[...] = self.z
        return self.O

    def centre(self, v_in: np.ndarray) -> None:
        """As centre: :attr:`z` from the members' ``v_ki`` (one row per neighbour k) and its
        own ``v_ii`` (``rho_ki = rho_ik``)."""
        rho = self._rho
        self.z[...] = self._centre((rho[0] * self.v_own + rho[1:] @ v_in) / self._total)

    def member(self, z_in: np.ndarray) -> None:
        """As member: :attr:`O` against ``t_ij = 2 z_j - v_ij`` of every neighbourhood it
        belongs to (``z_in`` one row per neighbour j, its own :attr:`z`), then its ``v_ij``."""
        rhs = self._rhs.reshape(-1)
        np.add(self._b2, self._coupling(2.0 * self.z - self.v_own, 2.0 * z_in - self._v),
               out=rhs)
        self.inv.apply(self._rhs, out=self.O)
        o = self.O.reshape(-1)
        self.v_own += self._eta * (o - self.z)
        self._v += self._eta * (o - z_in)

    def _centre(self, mean: np.ndarray) -> np.ndarray:
        """``z_i`` from the weighted mean of its members' ``v_ki`` (flat)."""
        return project_frobenius(mean, self._eps)

    def _coupling(self, t_own: np.ndarray, t: np.ndarray) -> np.ndarray:
        """``sum_j rho_ij t_ij`` (flat; ``t`` one row per neighbour)."""
        return self._rho[0] * t_own + self._rho[1:] @ t

    def __call__(self, Zr: Any) -> np.ndarray:
        """One activation given the neighbours' messages (one array of ``2 Q d`` values
        each, any shape)."""
        table = np.array([np.asarray(z, dtype=float).reshape(-1) for z in Zr]).reshape(
            len(Zr), 2 * self._size)
        return self.step_rows(table, np.arange(len(Zr), dtype=np.intp))


class MetricHoodStep(HoodStep):
    """:class:`HoodStep` in the Gram metric: the constraints of ``H_j`` weigh
    ``rho_ij ||.||_S_j^2``, ``S_j`` the metric of ``H_j`` (every member holds the same)::

        z_j = argmin ||Z - mean||_S_j^2 over the ball      (Metric.project)
        x_i = (2 B_i + sum_j rho_ij t_ij S_j) (2 G_i + sum_j rho_ij S_j)^-1

    ``metrics``: ``S_i`` first, then ``S_j`` of each neighbour, aligned with ``rho``;
    ``inv`` the inverse of the local matrix above
    (:class:`~dssfn_mpi.ssfn.metric.DenseInverse`).
    """

    def __init__(self, B2: np.ndarray, rho: np.ndarray, eta: float, eps: float, inv: Any,
                 metrics: list, store: tuple[np.ndarray, int] | None = None) -> None:
        super().__init__(B2, rho, eta, eps, inv, store=store)
        if len(metrics) != self._rho.size:
            raise ValueError(f"{len(metrics)} metrics for {self._rho.size} neighbourhoods")
        self.metrics, self._shape = list(metrics), B2.shape

    def _centre(self, mean: np.ndarray) -> np.ndarray:
        return self.metrics[0].project(mean.reshape(self._shape), self._eps).reshape(-1)

    def _coupling(self, t_own: np.ndarray, t: np.ndarray) -> np.ndarray:
        out = np.zeros(self._shape)
        for rho, S, tj in zip(self._rho, self.metrics, [t_own, *t]):
            out += rho * S.times(tj.reshape(self._shape))
        return out.reshape(-1)


class NeighbourhoodADMM(Algorithm):
    """ARock over the neighbourhood-consensus operator (exact: every node reaches ``O*``).

    A node's penalty is ``[rho_ii, rho_ij for each neighbour j]`` (:class:`HoodStep`); a set
    ``--rho`` is every ``rho_ij``, so a node's local matrix is ``2 G_i + (d_i + 1) rho I``.
    """

    name = "hood"
    driver = ONE_SIDED
    penalty_option = "rho"
    metric_form = True
    relays_metric = True
    local_stop = False
    min_ranks = 2
    summary = ("asynchronous neighbourhood consensus ADMM, one-sided puts (one consensus "
               "variable per closed neighbourhood)")
    #: Asynchronous, it needs a step below 1 (docs/ALGORITHMS.md section 10: measured
    #: 0.5 - 0.7 converge, 1 does not); in lockstep 1 converges.
    step_size = 0.6

    def __init__(self, name: str | None = None, driver: Driver | None = None,
                 summary: str | None = None, step_size: float | None = None) -> None:
        self.name = name or self.name
        self.driver = driver or self.driver
        self.summary = summary or self.summary
        self.step_size = step_size or self.step_size

    def message_floats(self, n_classes: int, d: int) -> int:
        """Two ``Q x d`` blocks: ``[v_ij, z_i]``."""
        return 2 * n_classes * d

    def fixed_penalty(self, value: float, degree: int) -> np.ndarray:
        """``--rho`` on every membership of the node (``degree + 1``)."""
        return np.full(degree + 1, float(value))

    def auto_penalty(self, own: np.ndarray, gathered: Any, graph: Any,
                     node: int) -> np.ndarray:
        """Consensus ADMM's rule (:func:`~dssfn_mpi.ssfn.solver.auto_penalty`) shared over the
        memberships (:meth:`shared_penalties`): ``rho_ii`` from the means of ``[lam, s, g]``
        over ``H_i``, ``rho_ij`` from the means over the edge's two ends."""
        theirs = np.asarray(gathered, dtype=float).reshape(-1, 3)
        mine = np.asarray(own, dtype=float)
        hood = (mine + theirs.sum(axis=0)) / (len(theirs) + 1)
        return self.shared_penalties(graph, node, auto_penalty(hood, True),
                                     [auto_penalty(0.5 * (mine + t), True) for t in theirs])

    def metric_penalty(self, graph: Any, node: int, ratio: float) -> np.ndarray:
        """Consensus ADMM's metric rho (:func:`~dssfn_mpi.ssfn.solver.metric_penalty`) shared
        over the memberships as in :meth:`auto_penalty`."""
        rho = metric_penalty(True, ratio=ratio)
        return self.shared_penalties(graph, node, rho, [rho] * graph.degree(node))

    @staticmethod
    def shared_penalties(graph: Any, node: int, own: float, edges: list[float]) -> np.ndarray:
        """A consensus rho per membership shared out, times the graph's factor
        ``max(1, AUTO_HOOD_GRAPH / sqrt(lambda_2))``: ``rho_ii = own / (d_i + 1)`` and
        ``rho_ij = edges[k] / (mean d + 1)`` over the edge's two ends (the same at both
        ends), so that without the factor a node's penalties sum to about consensus ADMM's
        rho."""
        nbrs = list(graph.neighbors(node))
        scale = max(1.0, AUTO_HOOD_GRAPH / np.sqrt(max(graph.algebraic_connectivity, 1e-12)))
        sizes = [0.5 * (graph.degree(node) + graph.degree(n)) + 1.0 for n in nbrs]
        return scale * np.array([own / (len(nbrs) + 1), *(e / z for e, z in zip(edges, sizes))])

    def metric(self, own_G: np.ndarray, gathered: Any) -> np.ndarray:
        """The node's own neighbourhood's ``S_i``: the mean of ``G`` over ``H_i`` (relayed
        to its members, :meth:`relayed_metric`)."""
        return gram_metric(own_G, *gathered)

    def relayed_metric(self, own: np.ndarray, gathered: Any) -> list[Metric]:
        """``S_i`` and each neighbour's ``S_j`` (as the centres sent them), aligned with the
        penalties."""
        return [Metric(own), *(Metric(S) for S in gathered)]

    def step(self, B2: np.ndarray, rho: np.ndarray, eta: float, eps: float, inv: Any,
             metric: Any = None, store: tuple[np.ndarray, int] | None = None) -> HoodStep:
        """The node's activation for one layer (:class:`HoodStep`, or
        :class:`MetricHoodStep` in the metric)."""
        if metric is None:
            return HoodStep(B2, rho, eta, eps, inv, store=store)
        return MetricHoodStep(B2, rho, eta, eps, inv, metric, store=store)
