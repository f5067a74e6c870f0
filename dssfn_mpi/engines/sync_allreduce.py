"""Synchronous baseline: global-consensus ADMM with one Allreduce per iteration.

``O_m = (2 B_m + rho (Zbar - U_m)) (2 G_m + rho I)^-1``;
``Zbar = P_eps(mean_m(O_m + U_m))``; ``U_m += O_m - Zbar`` (docs/ALGORITHMS.md
section 5). This is what an MPI user would write; it hides the graph.
"""

from __future__ import annotations

import time

import numpy as np

from ..solver import LocalInverse, auto_penalty
from ..trace import LayerTrace
from .base import Engine, LayerProblem, RunContext, SolveStats, Throttle, await_request
from .updates import consensus_dual, consensus_primal


class SyncAllreduceEngine(Engine):
    """Consensus ADMM, averaging with ``MPI_Allreduce`` (``--mode sync``)."""

    # Thread CPU of the arithmetic inside the last :meth:`average` (compute, not waiting).
    mix_cpu = 0.0

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.throttle = Throttle(ctx.cfg.slow.get(ctx.rank, 1.0))

    def average(self, x: np.ndarray, out: np.ndarray) -> None:
        """Write the average over all ranks of ``x`` into ``out``.

        A non-blocking allreduce awaited under the run's wait policy
        (:mod:`dssfn_mpi.waiting`), not a blocking one that always spins.
        """
        from mpi4py import MPI

        await_request(self.ctx, self.ctx.comm.Iallreduce(x, out, op=MPI.SUM), "allreduce")
        out /= self.ctx.size

    def auto_penalty(self, layer: int, stats: np.ndarray) -> float:
        """rho from the network means of ``stats``, taken with :meth:`average`."""
        mean = np.empty_like(stats)
        self.average(stats, mean)
        return auto_penalty(mean[0], mean[1], self.ctx.size, consensus=True)

    def solve(self, prob: LayerProblem,
              trace: LayerTrace | None = None) -> tuple[np.ndarray, SolveStats]:
        cfg = self.ctx.cfg
        rho = float(prob.penalty)
        t1, c1 = time.perf_counter(), time.thread_time()
        inv = LocalInverse(prob.Y, rho, prob.G)
        t2 = time.perf_counter()
        if trace is not None:
            trace.phase("factor", t1, t2, time.thread_time() - c1)
        B2 = 2.0 * prob.B
        U = np.zeros_like(prob.B)
        Zbar = np.zeros_like(prob.B)
        mean = np.empty_like(prob.B)
        comm_seconds = 0.0
        slept0 = self.ctx.wait_policy.slept
        for k in range(cfg.iters):
            started, cpu0 = time.perf_counter(), time.thread_time()
            O = consensus_primal(inv, B2, rho, Zbar, U)
            self.throttle.after(started)
            tc, cc = time.perf_counter(), time.thread_time()
            self.average(O + U, mean)
            comm_seconds += time.perf_counter() - tc
            # Leave out the collective's CPU (MPI spins while it waits) but not its arithmetic.
            cpu0 += time.thread_time() - cc - self.mix_cpu
            Zbar = consensus_dual(mean, prob.eps, O, U)
            if trace is not None:
                trace.record_activation(k, Zbar, started, cpu0, comm=tc)
        t3 = time.perf_counter()
        return Zbar, SolveStats(
            factor_seconds=t2 - t1,
            solve_seconds=t3 - t2,
            wait_seconds=comm_seconds,
            activations=cfg.iters,
            bytes_sent=cfg.iters * prob.B.nbytes,
            waits_slept=self.ctx.wait_policy.slept - slept0,
        )
