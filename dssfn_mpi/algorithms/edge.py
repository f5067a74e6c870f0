"""Pairwise edge consensus ADMM, asynchronous (ARock; ``--mode async``), the paper's method,
and its synchronous control (``--mode lockstep``: the same update in Jacobi rounds).

One consensus variable per edge; node m keeps ``Z_{m,n}`` for each neighbour n and
sends it to n after every activation (one-sided, or in the round's neighbour exchange).
The per-node arithmetic is :class:`~dssfn_mpi.algorithms.updates.EdgeStep` (``--update
edge``, exact) or eq. 7 of the paper (``--update paper``); docs/ALGORITHMS.md section 4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..drivers import ONE_SIDED, Driver
from ..ssfn.metric import LowRankMetric, Metric, metric_from_grams
from ..ssfn.solver import edge_penalties, metric_penalty
from .base import Algorithm, penalty_matrix
from .stoprule import NodeCheck
from .updates import EdgeStep, MetricEdgeStep, paper_activation

__all__ = ["EdgeADMM", "PaperStep", "PaperUpdate"]


class EdgeADMM(Algorithm):
    """ARock over the edge-consensus operator (exact: every node reaches ``O*``).

    Parameters
    ----------
    name, driver, summary : str, Driver, str, optional
        Another ``--mode`` name, driver kind and ``--help`` line for the same update
        (``EdgeADMM("lockstep", LOCKSTEP, ...)``: the synchronous control); the class's
        when omitted.
    step_size : float, optional
        Its default ``--eta`` (the class's when omitted).
    """

    name = "async"
    update = "edge"
    driver = ONE_SIDED
    penalty_option = "gamma"
    metric_form = True
    metric_per_edge = True
    min_ranks = 2
    summary = "asynchronous pairwise edge consensus ADMM, one-sided puts (the paper's method)"
    #: ARock's step on stale reads: within a few per cent of 1.8's activations over layers
    #: 0 - 2, fewer at the input layer, every live, jittered and straggling run at eps
    #: (docs/ALGORITHMS.md, "Default relaxations"); the lockstep control takes 1.8.
    step_size = 1.6

    def __init__(self, name: str | None = None, driver: Driver | None = None,
                 summary: str | None = None, step_size: float | None = None) -> None:
        self.name = name or self.name
        self.driver = driver or self.driver
        self.summary = summary or self.summary
        self.step_size = step_size or self.step_size

    def auto_penalty(self, own: np.ndarray, gathered: Any, graph: Any, node: int) -> np.ndarray:
        """gamma_mn from the means of ``[lam, s, g]`` over each edge's two ends."""
        return edge_penalties(own, gathered, graph)

    def metric_penalty(self, graph: Any, node: int, ratio: float) -> np.ndarray:
        """gamma_mn from the graph (the edge's mean degree and the algebraic connectivity)
        and the width over the mean samples per node: the same at both ends."""
        lam2 = graph.algebraic_connectivity
        return np.array([metric_penalty(False, 0.5 * (graph.degree(node) + graph.degree(n)),
                                        lam2, ratio) for n in graph.neighbors(node)])

    def metric(self, own_G: np.ndarray, gathered: Any) -> list[Metric | LowRankMetric]:
        """One metric per edge: the mean of its two ends' ``G`` (low-rank where the two
        ends' samples span few directions: :func:`~dssfn_mpi.ssfn.metric.metric_from_grams`)."""
        return [metric_from_grams(own_G, G) for G in gathered]

    def step(self, B2: np.ndarray, gamma: np.ndarray, eta: float, eps: float, inv: Any,
             metric: Any = None, store: tuple[np.ndarray, int] | None = None) -> Any:
        """The node's activation for one layer (:class:`~dssfn_mpi.algorithms.updates.EdgeStep`):
        holds ``Z`` (in ``store`` when given); ``step_rows(table, rows)`` runs one."""
        if metric is None:
            return EdgeStep(B2, gamma, eta, eps, inv, store=store)
        return MetricEdgeStep(B2, gamma, eta, eps, inv, metric, store=store)

    def node_check(self, rule: Any, target: np.ndarray | None, B2: np.ndarray,
                   penalty: float | np.ndarray, eta: float, metric: Any = None) -> NodeCheck:
        # K only for the local rule (a d x d matrix per node)
        K = None if metric is None or rule.needs_target else penalty_matrix(penalty, metric)
        return NodeCheck(rule, target, B2=B2, gamma=penalty, eta=eta, K=K)


class PaperStep:
    """Eq. 7 of the paper as a step object (``Z`` of its own, no right-hand side)."""

    rhs_buffer = None

    def __init__(self, B2: np.ndarray, gamma: np.ndarray, eta: float, eps: float,
                 inv: Any) -> None:
        self.B2, self.gamma, self.eta, self.eps, self.inv = B2, gamma, eta, eps, inv
        self.Z = np.zeros((len(gamma),) + B2.shape)
        self.O = np.zeros(B2.shape)

    def step_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """One activation given the neighbours' ``Z_{n,m}`` as rows of ``table``."""
        return self(table[rows, : self.B2.size].reshape(self.Z.shape))

    def __call__(self, Zr: Any) -> np.ndarray:
        """One activation given the neighbours' ``Z_{n,m}`` (``d_m`` arrays ``Q x d``)."""
        self.O = paper_activation(self.Z, np.asarray(Zr).reshape(self.Z.shape), self.B2,
                                  self.gamma, self.eta, self.eps, self.inv)
        return self.O


class PaperUpdate(EdgeADMM):
    """The paper's eq. 7 (``--update paper``): biased when the norm bound is active."""

    update = "paper"
    #: Eq. 7 is not the edge operator's relaxation; its step stays 1 (the paper's 0.5 under
    #: ``--preset paper``).
    step_size = 1.0
    metric_form = False
    local_stop = False
    exact = False
    summary = "async with the paper's eq. 7 update (biased when the norm bound is active)"

    def step(self, B2: np.ndarray, gamma: np.ndarray, eta: float, eps: float, inv: Any,
             metric: Any = None, store: tuple[np.ndarray, int] | None = None) -> PaperStep:
        return PaperStep(B2, gamma, eta, eps, inv)
