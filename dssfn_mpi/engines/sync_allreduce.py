"""Synchronous baseline: global-consensus ADMM with one Allreduce per iteration.

``O_m = (2 B_m + rho (Zbar - U_m)) (2 G_m + rho I)^-1``;
``Zbar = P_eps(mean_m(O_m + U_m))``; ``U_m += O_m - Zbar`` (docs/ALGORITHMS.md
section 5). This is what an MPI user would write; it hides the graph. In the
metric (``--metric gram``, the input layer) ``I`` becomes the network's mean
Gram matrix, taken with one more average before the layer.

Under ``--stop eps`` / ``local`` each rank's own test of iteration k's ``Zbar``
(:class:`~dssfn_mpi.algorithms.stoprule.NodeCheck`) rides as one more number in
the collective of the iterations that follow; once the collective says every
rank passed, every rank ends the layer in the same iteration and returns the
``Zbar`` that was tested (:meth:`SyncAllreduceEngine.vote_delay` iterations old).
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from ..ssfn.gramstats import StatsLayout
from ..ssfn.metric import Metric
from .base import Engine, LayerProblem, RunContext, SolveStats, Throttle, await_request
from .trace import LayerTrace


class SyncAllreduceEngine(Engine):
    """The consensus driver, averaging with ``MPI_Allreduce`` (``--mode sync``).

    Runs any algorithm of the ``consensus`` kind (:mod:`dssfn_mpi.algorithms`): its
    primal step, the vector it shares, its dual step, penalties and metric; this class
    owns the collective, the votes and the timing.
    """

    # Thread CPU of the arithmetic inside the last :meth:`average` (compute, not waiting).
    mix_cpu = 0.0
    #: Neighbours a round of averaging sends to, and the rounds (-1: one allreduce).
    neighbors: list[int] = []
    rounds = -1

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.alg = ctx.cfg.algorithm
        self.throttle = Throttle(ctx.cfg.slow.get(ctx.rank, 1.0))
        self.rule = ctx.cfg.stop_rule

    def vote_delay(self) -> int:
        """Iterations from a rank's test to every rank knowing all results: 1 (one allreduce)."""
        return 1

    def average(self, x: np.ndarray, out: np.ndarray, votes: int = 0) -> None:
        """Write the average over all ranks of ``x`` into ``out``.

        A non-blocking allreduce awaited under the run's wait policy
        (:mod:`dssfn_mpi.mailbox.waiting`), not a blocking one that always spins.
        The last ``votes`` entries of a flat ``x`` are 0/1 flags: ``out`` gets 1
        there where every rank's flag is 1, else 0.
        """
        from mpi4py import MPI

        await_request(self.ctx, self.ctx.comm.Iallreduce(x, out, op=MPI.SUM), "allreduce")
        size = self.ctx.size
        if votes:
            n = out.size - votes
            out[:n] /= size
            out[n:] = out[n:] > size - 0.5  # sums of 0s and 1s are exact
        else:
            out /= size

    def auto_penalty(self, layer: int, stats: np.ndarray) -> float:
        """rho from the network means of ``stats``, taken with :meth:`average`."""
        mean = np.empty_like(stats)
        self.average(stats, mean)
        return self.alg.auto_penalty(stats, mean, self.ctx.graph, self.ctx.rank)

    def metric(self, layer: int, G: np.ndarray) -> Metric:
        """The mean of the ranks' ``G_m`` (upper triangles, with :meth:`average`) as the metric."""
        layout = StatsLayout(G.shape[0], 0)
        packed = layout.pack(G, G[:0])
        mean = np.empty_like(packed)
        self.average(packed, mean)
        return self.alg.metric(G, layout.unpack(mean)[0])

    def solve(self, prob: LayerProblem,
              trace: LayerTrace | None = None) -> tuple[np.ndarray, SolveStats]:
        cfg, metric, alg = self.ctx.cfg, prob.metric, self.alg
        rho = float(prob.penalty)
        inv, t1, t2 = self.factor(prob, rho, trace)
        B2 = 2.0 * prob.B
        U = np.zeros_like(prob.B)
        Zbar = np.zeros_like(prob.B)
        # One flat buffer: O_m + U_m, then (under eps / local) the votes of the last A
        # iterations, newest first; after the collective, vote a covers iteration k - 1 - a.
        size = prob.B.size
        A = 0 if self.rule.fixed else self.vote_delay()
        buf, flat = np.zeros(size + A), np.zeros(size + A)
        x, mean = buf[:size].reshape(prob.B.shape), flat[:size].reshape(prob.B.shape)
        check = None if A == 0 else alg.node_check(self.rule, prob.target_O, B2, rho, cfg.eta)
        tested: deque[np.ndarray] = deque(maxlen=A)  # Zbar of the last A iterations
        comm_seconds, flag, ended, done = 0.0, 0.0, False, 0
        slept0 = self.ctx.wait_policy.slept
        for k in range(cfg.iters):
            started, cpu0 = time.perf_counter(), time.thread_time()
            O = alg.primal(inv, B2, rho, Zbar, U, metric)
            self.throttle.after(started)
            tc, cc = time.perf_counter(), time.thread_time()
            alg.share(O, U, Zbar, x)
            if A:
                buf[size + 1 :] = flat[size : size + A - 1]
                buf[size] = flag
            self.average(buf, flat, A)
            comm_seconds += time.perf_counter() - tc
            # Leave out the collective's CPU (MPI spins while it waits) but not its arithmetic.
            cpu0 += time.thread_time() - cc - self.mix_cpu
            done = k + 1
            if A and len(tested) == A and flat[-1] == 1.0:
                # Every rank passed its test of iteration k - A: end with that Zbar.
                Zbar, ended = tested[0], True
                if trace is not None:
                    trace.record_activation(k, Zbar, started, cpu0, comm=tc)
                break
            Zbar = alg.dual(mean, prob.eps, O, U, Zbar, metric)
            if check is not None:
                flag = float(check.sync_done(O, Zbar))
                tested.append(Zbar.copy())  # Zbar may be the collective's buffer
            if trace is not None:
                trace.record_activation(k, Zbar, started, cpu0, comm=tc)
        t3 = time.perf_counter()
        if trace is not None:
            trace.close(done, Zbar)
        _, sent = alg.sent(done, len(self.neighbors), self.rounds,
                           alg.message_bytes(*prob.B.shape))
        return Zbar.copy(), SolveStats(
            factor_seconds=t2 - t1,
            solve_seconds=t3 - t2,
            wait_seconds=comm_seconds,
            activations=done,
            stop_reason=self.rule.reason(ended),
            bytes_sent=sent,
            mix_rounds=self.rounds,
            waits_slept=self.ctx.wait_policy.slept - slept0,
        )
