"""Lockstep dSSFN: the one-sided step in Jacobi rounds, exchanged with the neighbours alone
(``--mode lockstep``, the synchronous control of the async operator).

Every rank runs the same rounds. Round k: the algorithm's activation
(``step.step_rows``, the one-sided driver's own step) reads exactly what each neighbour
sent after its round k-1 (zeros in round 0), then one ``MPI_Ineighbor_alltoall`` on a
distributed-graph communicator sends neighbour n this rank's message for n (``step.Z[i]``,
as the one-sided driver puts it) and receives n's message for this rank. An algorithm whose
round has several phases (:meth:`~dssfn_mpi.algorithms.Algorithm.phases`, ``hood-jacobi``)
runs each on what the exchange before it received, and ends each with its own exchange.
No barrier and no global collective inside a layer: only the neighbour exchanges, awaited
under the run's wait policy (:mod:`dssfn_mpi.mailbox.waiting`).

Under ``--stop eps`` / ``local`` each rank's own test
(:class:`~dssfn_mpi.algorithms.stoprule.NodeCheck`, the one-sided driver's ``async_done``) rides in
the round's (last) exchange, as sync-graph's votes ride in its mixing: ``A = diameter`` flags
per message, each replaced round by round by its minimum over the neighbours, so after
round k every rank knows whether every rank passed its test of round ``k - A + 1``. All
ranks then end the layer in the same round, each with its iterate of that round: ``A -
1`` rounds after the tested one (none on the complete graph), and no collective.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from .base import LayerProblem, RunContext, SolveStats, Throttle, await_request
from .neighbours import NeighbourEngine
from .trace import LayerTrace

__all__ = ["LockstepEngine", "vote_slots"]


def vote_slots(rule: Any, graph: Any) -> int:
    """Flags per message under ``rule``: the graph's diameter (at least 1); 0 under
    ``iters``. The one home of the lockstep vote's delay (the simulator's too)."""
    return 0 if rule.fixed else max(1, int(graph.diameter))


class LockstepEngine(NeighbourEngine):
    """The lockstep driver: any algorithm of the per-neighbour kind
    (:attr:`~dssfn_mpi.algorithms.Algorithm.per_neighbour`) in Jacobi rounds.

    It uses what the one-sided driver uses of the algorithm: its step (``step``,
    ``step_rows``, ``Z``, ``rhs_buffer``), penalties, metric, ``node_check`` and
    ``sent``; this class owns the exchange, the votes and the timing.
    """

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.throttle = Throttle(ctx.cfg.slow.get(ctx.rank, 1.0))
        self.rule = ctx.cfg.stop_rule
        self.slots = vote_slots(self.rule, ctx.graph)

    def solve(self, prob: LayerProblem,
              trace: LayerTrace | None = None) -> tuple[np.ndarray, SolveStats]:
        cfg, alg, dm = self.ctx.cfg, self.alg, len(self.neighbors)
        gamma = self.penalties(prob)
        inv, t1, t2 = self.factor(prob, gamma, trace)
        B2 = 2.0 * prob.B
        payload = alg.message_bytes(*prob.B.shape)
        # One exchange's message: float64 values (the round's payload in equal shares).
        size = payload // 8 // alg.exchanges
        # Row i of an exchange's buffers: the message for (send) or from (recv) neighbour i;
        # the round's last exchange carries the votes after the values.
        width = [size] * (alg.exchanges - 1) + [size + self.slots]
        sends = [np.zeros((dm, w)) for w in width]
        step = alg.step(B2, gamma, cfg.eta, prob.eps, inv, prob.metric, store=(sends[0], 0))
        phases = alg.phases(step)
        # An outbox outside its exchange's buffer is copied into it every round.
        copied = [not np.shares_memory(outbox, send) for (_, outbox), send in zip(phases, sends)]
        last = len(phases) - 1
        check = (None if self.slots == 0 else
                 alg.node_check(self.rule, prob.target_O, B2, gamma, cfg.eta, prob.metric))
        rounds = _Rounds(self, sends, size, trace)
        for k in range(cfg.iters):
            started, cpu0 = time.perf_counter(), time.thread_time()
            for p, (phase, outbox) in enumerate(phases):
                begun = started if p == 0 else time.perf_counter()
                O = phase(rounds.recvs[p - 1], rounds.rows)
                if p == last:
                    flag = check is not None and check.async_done(O, step.rhs_buffer)
                # A slow node computes slowly, then sends (as in the other drivers).
                self.throttle.after(begun)
                if copied[p]:
                    sends[p][:, :size] = np.reshape(outbox, (dm, -1))
                if p < last:
                    rounds.pass_on(p)
            if rounds.exchange(k, O, flag, started, cpu0):
                break
        O = rounds.result(O)
        if trace is not None:
            trace.close(rounds.done, O)
        _, sent = alg.sent(rounds.done, dm, 0, payload)
        return O, SolveStats(
            factor_seconds=t2 - t1,
            solve_seconds=time.perf_counter() - t2,
            wait_seconds=rounds.comm_seconds,
            activations=rounds.done,
            stop_reason=self.rule.reason(rounds.ended),
            bytes_sent=sent,
            waits_slept=self.waits.slept - rounds.slept0,
        )


class _Rounds:
    """One layer's exchanges and votes: what a round sends after each phase, and whether
    the layer is over."""

    def __init__(self, engine: LockstepEngine, sends: list[np.ndarray], size: int,
                 trace: LayerTrace | None) -> None:
        self.engine, self.sends, self.size, self.trace = engine, sends, size, trace
        self.recvs = [np.zeros_like(send) for send in sends]
        self.rows = np.arange(sends[0].shape[0], dtype=np.intp)
        A = engine.slots
        self.known = np.zeros(A)  # after round k: slot a, every flag of round k - a within
        self.tested: deque[np.ndarray] = deque(maxlen=A)  # a + 1 hops (all: a = A - 1)
        self.comm_seconds, self.comm_cpu, self.done, self.ended = 0.0, 0.0, 0, False
        self.slept0 = engine.waits.slept

    def pass_on(self, p: int) -> float:
        """Exchange phase ``p``'s messages with the neighbours; returns when it began."""
        tc, cc = time.perf_counter(), time.thread_time()
        request = self.engine.dcomm.Ineighbor_alltoall(self.sends[p], self.recvs[p])
        await_request(self.engine.ctx, request, "neighbour exchange")
        self.comm_seconds += time.perf_counter() - tc
        self.comm_cpu += time.thread_time() - cc
        return tc

    def exchange(self, k: int, O: np.ndarray, flag: bool, started: float,
                 cpu0: float) -> bool:
        """Send round ``k``'s last messages (its iterate ``O``, own test ``flag``) and receive
        the neighbours'; True when every rank passed its test ``A - 1`` rounds ago."""
        send, size, A = self.sends[-1], self.size, self.engine.slots
        if A:
            self.tested.append(O.copy())
            send[:, size] = float(flag)
            send[:, size + 1 :] = self.known[:-1]
        tc = self.pass_on(len(self.sends) - 1)
        if A:
            np.minimum(send[0, size:], self.recvs[-1][:, size:].min(axis=0), out=self.known)
        self.done = k + 1
        if self.trace is not None:  # the exchanges' CPU left out (MPI spins while it waits)
            self.trace.record_activation(k, O, started, cpu0 + self.comm_cpu, comm=tc)
        self.comm_cpu = 0.0
        self.ended = bool(A) and self.known[-1] == 1.0
        return self.ended

    def result(self, O: np.ndarray) -> np.ndarray:
        """The layer's iterate: the tested one when every rank passed, else the last."""
        return self.tested[0].copy() if self.ended else O.copy()
