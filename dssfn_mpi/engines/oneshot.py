"""The one-shot baseline: exchange the layer's statistics once, solve exactly on every rank.

The layer problem depends on the data only through ``G = sum_m G_m`` and
``B = sum_m B_m`` (docs/ALGORITHMS.md section 2). ``--mode oneshot`` averages
every rank's packed statistics (``G_m``'s upper triangle and ``B_m``,
:class:`~dssfn_mpi.ssfn.gramstats.StatsLayout`) with one ``MPI_Iallreduce`` and
solves the averaged problem with :func:`dssfn_mpi.ssfn.solver.exact_solve`, the
solver of the equivalence check: every rank holds ``O*``. Averaging instead of
summing scales ``G`` and ``B`` alike, which leaves the minimiser unchanged.

``--mode oneshot-graph`` averages them without a collective, by the rounds of
neighbour mixing of the sync-graph engine
(:meth:`~dssfn_mpi.engines.sync_graph.SyncGraphEngine.average`), as many as
:func:`dssfn_mpi.ssfn.gramstats.stats_rounds` needs for ``--mix-tol`` (or
``--mix-rounds``). Each rank then solves its own copy exactly: its ``O`` is the
centralized ``O*`` only in the limit of many rounds.

Both are awaited under the run's wait policy, like the engines they borrow
the exchange from. The statistics' time, bytes and peak memory go to the run
log; there is no penalty, iteration count or stopping rule.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import numpy as np

from ..ssfn.gramstats import StatsLayout, stats_rounds
from ..ssfn.solver import exact_solve
from .base import Engine, LayerProblem, RunContext, SolveStats, Throttle
from .trace import LayerTrace

__all__ = ["OneshotEngine", "PeakMemory"]


class PeakMemory:
    """Peak bytes allocated through Python's allocators (numpy arrays included) in a block.

    Uses :mod:`tracemalloc`; if it is already tracing, its peak is reset and
    tracing left on. Memory held by MPI or BLAS outside numpy is not seen.
    """

    def __enter__(self) -> PeakMemory:
        self._started = not tracemalloc.is_tracing()
        if self._started:
            tracemalloc.start()
        else:
            tracemalloc.reset_peak()
        self._base = tracemalloc.get_traced_memory()[0]
        self.peak = 0
        return self

    def __exit__(self, *exc: Any) -> None:
        self.peak = max(tracemalloc.get_traced_memory()[1] - self._base, 0)
        if self._started:
            tracemalloc.stop()


class OneshotEngine(Engine):
    """Statistics averaged once, exact solve on every rank (``--mode oneshot[-graph]``)."""

    direct = True

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.alg = ctx.cfg.algorithm
        self.graph_form = self.alg.mixes
        self.throttle = Throttle(ctx.cfg.slow.get(ctx.rank, 1.0))
        self._layouts: dict[int, StatsLayout] = {}
        # The exchange is the sync engines' own average (collective to build).
        if self.graph_form:
            from .sync_graph import SyncGraphEngine

            self.mixer: Any = SyncGraphEngine(ctx)
            self.mixer.rounds = stats_rounds(ctx.graph, ctx.cfg.mix_tol, ctx.cfg.mix_rounds)
        else:
            from .sync_allreduce import SyncAllreduceEngine

            self.mixer = SyncAllreduceEngine(ctx)

    @property
    def rounds(self) -> int:
        """Mixing rounds per layer (graph form), -1 for the allreduce."""
        return self.mixer.rounds if self.graph_form else -1

    def layout(self, d: int) -> StatsLayout:
        """The packing of a layer of input width ``d`` (kept: widths repeat)."""
        if d not in self._layouts:
            self._layouts[d] = StatsLayout(d, self.ctx.n_classes)
        return self._layouts[d]

    def auto_penalty(self, layer: int, stats: np.ndarray) -> float:
        """No penalty: the layer is solved exactly."""
        return float("nan")

    def solve(self, prob: LayerProblem,
              trace: LayerTrace | None = None) -> tuple[np.ndarray, SolveStats]:
        slept0 = self.ctx.wait_policy.slept
        with PeakMemory() as memory:
            t1, c1 = time.perf_counter(), time.thread_time()
            lay = self.layout(prob.G.shape[0])
            send = lay.pack(prob.G, prob.B)
            t2 = time.perf_counter()
            if trace is not None:
                trace.phase("factor", t1, t2, time.thread_time() - c1)
            mean = np.empty(lay.size)
            self.mixer.average(send, mean)
            tc = time.perf_counter()
            # Leave out the exchange's CPU (MPI spins while it waits) but not the mixing.
            cpu0 = time.thread_time() - self.mixer.mix_cpu
            del send
            G, B = lay.unpack(mean)
            O = exact_solve(G, B, prob.eps).O
            self.throttle.after(tc)
        t3 = time.perf_counter()
        if trace is not None:
            trace.record_activation(0, O, t2, cpu0, comm=t2)
            trace.close(1, O)
        return O, SolveStats(
            factor_seconds=t2 - t1,
            solve_seconds=t3 - t2,
            wait_seconds=tc - t2,
            activations=1,
            bytes_sent=self.alg.sent(1, len(self.mixer.neighbors), self.rounds, lay.nbytes)[1],
            mix_rounds=self.rounds,
            waits_slept=self.ctx.wait_policy.slept - slept0,
            stats_peak_bytes=memory.peak,
        )

    def close(self) -> None:
        self.mixer.close()
