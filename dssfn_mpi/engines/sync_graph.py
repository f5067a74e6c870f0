"""Synchronous dSSFN through the graph: consensus ADMM whose average is
reached by neighbour mixing only (the paper's synchronous baseline).

Each ADMM iteration replaces the Allreduce by ``r`` rounds of
``x_m <- W_mm x_m + sum_n W_mn x_n`` with Metropolis weights, exchanged by
``MPI_Neighbor_allgather`` on a distributed-graph communicator. Sparser
graphs mix slower and need more rounds, which is why this baseline's time
falls as the degree grows (the paper's figure 2).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..graph.mixing import mix_round
from .base import RunContext, await_request
from .sync_allreduce import SyncAllreduceEngine


class SyncGraphEngine(SyncAllreduceEngine):
    """The consensus driver with neighbour-only averaging (``--mode sync-graph``)."""

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        me = ctx.rank
        self.neighbors = list(ctx.graph.neighbors(me))
        W = ctx.graph.metropolis_weights()
        self.w_self = float(W[me, me])
        self.w_nbr = np.array([W[me, n] for n in self.neighbors])
        self.rounds = self.alg.mix_rounds(ctx.graph, ctx.cfg.mix_rounds, ctx.cfg.mix_tol)
        self.dcomm = ctx.comm.Create_dist_graph_adjacent(
            self.neighbors, self.neighbors, reorder=False
        )

    def vote_delay(self) -> int:
        """Iterations for a rank's vote to reach every rank: ``ceil(diameter / rounds)``.

        Each mixing round carries the votes one hop further (a minimum over
        neighbours), so after that many iterations every rank has the minimum
        of everyone's vote of the same iteration, and all decide alike.
        """
        return max(1, math.ceil(self.ctx.graph.diameter / self.rounds))

    def average(self, x: np.ndarray, out: np.ndarray, votes: int = 0) -> None:
        """Approximate the network average of ``x`` by ``self.rounds`` mixing rounds.

        The last ``votes`` entries of a flat ``x`` are 0/1 flags: each round
        replaces them by their minimum over the neighbours instead of mixing them.
        """
        recv = np.empty((len(self.neighbors),) + x.shape)
        out[...] = x
        n = out.shape[0] - votes
        self.mix_cpu = 0.0
        for _ in range(self.rounds):
            # Non-blocking, awaited under the run's wait policy (dssfn_mpi.mailbox.waiting).
            await_request(self.ctx, self.dcomm.Ineighbor_allgather(out, recv),
                          "neighbour exchange")
            c = time.thread_time()
            if votes:
                mix_round(out[:n], recv[:, :n], self.w_self, self.w_nbr)
                np.minimum(out[n:], recv[:, n:].min(axis=0), out=out[n:])
            else:
                mix_round(out, recv, self.w_self, self.w_nbr)
            self.mix_cpu += time.thread_time() - c

    def close(self) -> None:
        self.dcomm.Free()
