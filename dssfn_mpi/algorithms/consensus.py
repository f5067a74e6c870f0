"""Global consensus ADMM (``--mode sync``: one allreduce; ``sync-graph``: neighbour mixing).

``O_m = (2 B_m + rho (Zbar - U_m) S) (2 G_m + rho S)^-1``;
``Zbar = P_eps(mean_m(O_m + U_m))``; ``U_m += O_m - Zbar`` (docs/ALGORITHMS.md
section 5; ``S = I`` but on a layer solved in the Gram metric). Under ``--relax alpha``
(Boyd et al. 2011, section 3.4.3) ``Oh_m = alpha O_m + (1 - alpha) Zbar_old`` replaces
``O_m`` in the average and in the dual step; the fixed point, and so ``O*``, is the same.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ..drivers import CONSENSUS
from ..ssfn.metric import Metric, gram_metric
from ..ssfn.solver import auto_penalty, metric_penalty
from .base import Algorithm
from .updates import consensus_dual, consensus_primal

__all__ = ["MIX_TOLERANCE", "ConsensusADMM"]

#: Disagreement left after an iteration's mixing, relative to its start (sync-graph's default
#: rounds).
MIX_TOLERANCE = 1e-4


class ConsensusADMM(Algorithm):
    """Consensus ADMM; the driver averages :meth:`share` over the network each iteration.

    An iteration on node m: ``O = primal(...)``; ``share(O, U, Zbar, out)`` writes the
    vector to average; the driver averages it (``mean``); ``Zbar = dual(mean, ...)``.
    """

    name = "sync"
    driver = CONSENSUS
    averaging = "allreduce"
    penalty_option = "rho"
    metric_form = True
    relaxes = True
    #: The over-relaxation alpha in (0, 2); 1 is plain consensus ADMM. The default, 1.8,
    #: took the fewest iterations at every layer, graph and node count measured
    #: (docs/ALGORITHMS.md, "Default relaxations").
    relax = 1.8
    summary = "consensus ADMM, one allreduce per iteration"

    def __init__(self, name: str | None = None, averaging: str | None = None,
                 summary: str | None = None) -> None:
        self.name = name or self.name
        self.averaging = averaging or self.averaging
        self.summary = summary or self.summary

    def configured(self, cfg: Any) -> ConsensusADMM:
        """A copy with ``cfg.relax`` (itself when that is its own)."""
        if cfg.relax == self.relax:
            return self
        alg = copy.copy(self)
        alg.relax = float(cfg.relax)
        return alg

    def relaxed(self, O: np.ndarray, Zbar: np.ndarray) -> np.ndarray:
        """``Oh = alpha O + (1 - alpha) Zbar`` (``Zbar`` the iteration's old one)."""
        return self.relax * O + (1.0 - self.relax) * Zbar

    def mix_rounds(self, graph: Any, rounds: int | None, tol: float) -> int:
        """``--mix-rounds``, else enough to shrink disagreement by :data:`MIX_TOLERANCE`."""
        return (rounds or graph.mixing_rounds(MIX_TOLERANCE)) if self.mixes else 0

    def auto_penalty(self, own: np.ndarray, gathered: Any, graph: Any, node: int) -> float:
        """rho from the network mean of ``[lam, s, g]``."""
        return auto_penalty(gathered, True)

    def metric_penalty(self, graph: Any, node: int, ratio: float) -> float:
        """rho from the width over the mean samples per node alone (no graph)."""
        return metric_penalty(True, ratio=ratio)

    def metric(self, own_G: np.ndarray, gathered: Any) -> Metric:
        """The network mean of the nodes' ``G_m``."""
        return Metric(gram_metric(gathered))

    def primal(self, inv: Any, B2: np.ndarray, rho: float, Zbar: np.ndarray, U: np.ndarray,
               metric: Any = None) -> np.ndarray:
        """The node's local step ``O_m``."""
        return consensus_primal(inv, B2, rho, Zbar, U, metric)

    def share(self, O: np.ndarray, U: np.ndarray, Zbar: np.ndarray, out: np.ndarray) -> None:
        """Write the node's vector to average into ``out``: ``Oh_m + U_m``.

        Relaxed, ``U`` becomes ``U_m + Oh_m`` here (``Zbar`` may be the buffer the driver
        averages into, so :meth:`dual` must not read it)."""
        if self.relax == 1.0:
            np.add(O, U, out=out)
            return
        U += self.relaxed(O, Zbar)
        out[...] = U

    def dual(self, mean: np.ndarray, eps: float, O: np.ndarray, U: np.ndarray,
             Zbar: np.ndarray, metric: Any = None) -> np.ndarray:
        """The new ``Zbar`` from the average (``U += Oh - Zbar_new`` in place); ``Zbar`` is
        the old."""
        if self.relax == 1.0:
            return consensus_dual(mean, eps, O, U, metric)
        return consensus_dual(mean, eps, 0.0, U, metric)  # U holds U + Oh (share)
