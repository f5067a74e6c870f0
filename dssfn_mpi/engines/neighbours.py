"""What the per-neighbour drivers share: penalties and metrics agreed with each neighbour.

The one-sided driver (:mod:`.async_arock`) and the lockstep driver (:mod:`.lockstep`) run
algorithms of the per-neighbour kind (:attr:`~dssfn_mpi.algorithms.Algorithm.per_neighbour`):
one penalty and one metric per edge, formed from what the edge's two ends exchange.
"""

from __future__ import annotations

import numpy as np

from ..errors import RankError
from ..ssfn.gramstats import StatsLayout
from ..ssfn.metric import Metric
from .base import Engine, LayerProblem, RunContext

__all__ = ["NeighbourEngine"]


class NeighbourEngine(Engine):
    """A driver with a distributed-graph communicator over the rank's neighbours
    (:attr:`dcomm`), and the layer-start exchanges through it.

    Subclasses call ``__init__`` (collective) and :meth:`close`.
    """

    def __init__(self, ctx: RunContext) -> None:
        # The compiled step is built (or loaded from numba's cache) here, untimed, by rank 0
        # first: numba's cache is not safe against processes writing it at once (numba issue
        # 4807), and the others then load what rank 0 wrote.
        self.alg = ctx.cfg.algorithm
        if ctx.rank == 0:
            self.alg.prepare()
        ctx.comm.Barrier()
        self.alg.prepare()

        self.ctx = ctx
        self.neighbors = tuple(ctx.graph.neighbors(ctx.rank))
        assert ctx.wait_policy is not None
        self.waits = ctx.wait_policy  # every wait of this engine goes through it
        self.dcomm = ctx.comm.Create_dist_graph_adjacent(
            self.neighbors, self.neighbors, reorder=False
        )

    def auto_penalty(self, layer: int, stats: np.ndarray) -> np.ndarray:
        """gamma_mn for each neighbour n from the means of ``stats`` over {m, n}.

        One neighbourhood allgather of three numbers, so a rank waits for its
        neighbours (never anyone else) to reach the layer; under the default
        bounded delay it would wait for them in its first activations anyway.
        The wait sleeps, and gives up after ``--timeout`` like every other.
        Both ends of an edge compute the same value.
        """
        mine = np.ascontiguousarray(stats, dtype=float)
        # The graph is known to every rank from the configuration.
        return self.alg.auto_penalty(mine, self._gather(layer, mine), self.ctx.graph,
                                     self.ctx.rank)

    def metric(self, layer: int, G: np.ndarray) -> list[Metric]:
        """The node's metrics as its algorithm forms them, agreed with each neighbour (the
        edge form: one per edge, the mean of the two ends' ``G``).

        One neighbourhood allgather of the upper triangle of ``G_m`` (as
        :meth:`auto_penalty`'s, it waits for the neighbours only), and a second one of
        the node's own matrix when the algorithm relays it (``hood``: each centre's
        neighbourhood metric). Every end builds a metric from the same unpacked numbers,
        so all hold the same one.
        """
        layout = StatsLayout(G.shape[0], 0)
        own, theirs = self._exchange_matrix(layer, layout, G)
        metric = self.alg.metric(own, theirs)
        if not self.alg.relays_metric:
            return metric
        # A second exchange: each node's matrix (its neighbourhood's metric) to its members.
        return self.alg.relayed_metric(*self._exchange_matrix(layer, layout, metric))

    def _exchange_matrix(self, layer: int, layout: StatsLayout,
                         A: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """A symmetric ``A`` and each neighbour's, as every end unpacks them (the upper
        triangles, one neighbourhood allgather)."""
        mine = layout.pack(A, A[:0])
        theirs = self._gather(layer, mine)
        return layout.unpack(mine)[0], [layout.unpack(row)[0] for row in theirs]

    def penalties(self, prob: LayerProblem) -> np.ndarray:
        """The layer's penalties, one per neighbour (or as the algorithm lays them out): the
        ``auto`` ones as computed, a set ``--gamma`` / ``--rho`` by the algorithm's rule."""
        penalty = np.asarray(prob.penalty, dtype=float)
        if penalty.ndim == 0:
            return np.asarray(self.alg.fixed_penalty(float(penalty), len(self.neighbors)))
        return penalty

    def _gather(self, layer: int, mine: np.ndarray) -> np.ndarray:
        """Every neighbour's ``mine`` (rows in the order of the neighbours), at a layer's start."""
        theirs = np.empty((len(self.neighbors), mine.size))
        request = self.dcomm.Ineighbor_allgather(mine, theirs)
        if not self.waits.wait_request(request, self.ctx.cfg.timeout).ready:
            raise RankError(
                self.ctx.rank,
                f"layer {layer}: neighbours did not start it within {self.ctx.cfg.timeout:g} s "
                "(a rank died or hangs; see --timeout)",
            )
        return theirs

    def close(self) -> None:
        self.dcomm.Free()
