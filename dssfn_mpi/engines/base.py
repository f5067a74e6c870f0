"""What every engine shares: the run context, one layer's problem, its stats."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import RankError
from ..mailbox.waiting import WaitPolicy
from ..ssfn.solver import ExactSolution

if TYPE_CHECKING:
    from .trace import LayerTrace

__all__ = ["Engine", "LayerProblem", "RunContext", "SolveStats", "Throttle", "await_request"]


@dataclass
class RunContext:
    """What a rank knows about the run: its communicator, graph and settings (``cfg``, a
    :class:`~dssfn_mpi.config.TrainConfig`)."""

    comm: Any
    graph: Any
    cfg: Any
    n_classes: int
    max_width: int
    first_layer: int = 0  # > 0 when resuming from a checkpoint
    # The run's wait policy, shared with the layer loop; None: cfg.wait on this
    # rank alone (auto then assumes a core per rank).
    wait_policy: WaitPolicy | None = None

    def __post_init__(self) -> None:
        if self.wait_policy is None:
            self.wait_policy = WaitPolicy(self.cfg.wait)

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    @property
    def size(self) -> int:
        return self.comm.Get_size()


@dataclass
class LayerProblem:
    """One rank's share of a layer problem ``min ||T_m - O Y_m||^2, ||O||^2 <= eps``."""

    layer: int
    Y: np.ndarray
    T: np.ndarray
    G: np.ndarray
    B: np.ndarray
    eps: float
    # rho (sync, sync-graph): one value, the same on every rank. gamma (async): one
    # value per neighbour, in the order of graph.neighbors(rank), the same at both
    # ends of an edge; a scalar means that value on every edge.
    penalty: float | np.ndarray = 1.0
    # The metric of the penalty (--metric gram, dssfn_mpi/ssfn/metric.py), from Engine.metric:
    # one Metric (sync, sync-graph) or one per neighbour (async); None: the identity.
    metric: Any = None
    # The layer's exact solution (O* and its multiplier, the same on every rank), given only
    # under --stop eps.
    target: ExactSolution | None = None

    @property
    def target_O(self) -> np.ndarray | None:
        """``O*`` under ``--stop eps``, else None."""
        return None if self.target is None else self.target.O


@dataclass
class SolveStats:
    """What an engine measured while solving one layer on this rank.

    The fields are the run log's ``engine`` fields (:mod:`dssfn_mpi.runlog.schema`,
    same names, units and meaning); the defaults are what an engine reports
    when it has nothing to say: no time, no messages, and "not measured"
    (NaN, -1) for what only some engines have.
    """

    solve_seconds: float
    factor_seconds: float = 0.0
    wait_seconds: float = 0.0
    activations: int = 0
    puts: int = 0
    bytes_sent: int = 0
    staleness_mean: float = float("nan")
    staleness_max: float = float("nan")
    mix_rounds: int = -1
    torn_retries: int = -1
    fallbacks: int = -1
    waits_slept: int = 0
    stop_reason: int = -1
    stats_peak_bytes: int = -1


def await_request(ctx: RunContext, request: Any, what: str) -> float:
    """Wait for ``request`` (a non-blocking collective) under the run's wait policy.

    Returns the seconds waited; raises :class:`~dssfn_mpi.errors.RankError`
    after ``--timeout`` seconds (a rank died or hangs).
    """
    assert ctx.wait_policy is not None
    ready, waited = ctx.wait_policy.wait_request(request, ctx.cfg.timeout)
    if not ready:
        raise RankError(ctx.rank, f"{what}: the other ranks did not answer within "
                        f"{ctx.cfg.timeout:g} s (a rank died or hangs; see --timeout)")
    return waited


@dataclass
class Throttle:
    """Straggler emulation: after each activation, sleep ``(factor - 1)`` times its duration.

    Sleeping (not spinning) keeps the core free for the other ranks, as a
    slower node would.
    """

    factor: float = 1.0
    slept: float = field(default=0.0)

    def after(self, started: float) -> None:
        """Call at the end of an activation that began at ``started``."""
        if self.factor > 1.0:
            delay = (self.factor - 1.0) * (time.perf_counter() - started)
            time.sleep(delay)
            self.slept += delay


class Engine:
    """Interface of a per-layer solver."""

    # True for the engines that solve a layer in one step (central, one-shot): no
    # penalty, no iteration count, no stopping rule.
    direct = False

    def factor(self, prob: LayerProblem, penalty: Any,
               trace: Any = None) -> tuple[Any, float, float]:
        """The algorithm's local inverse for ``penalty`` (``self.alg``), timed: ``(inv, start,
        end)``, with the trace's ``factor`` phase recorded."""
        t1, c1 = time.perf_counter(), time.thread_time()
        inv = self.alg.inverse(prob.Y, prob.G, penalty, prob.metric)
        t2 = time.perf_counter()
        if trace is not None:
            trace.phase("factor", t1, t2, time.thread_time() - c1)
        return inv, t1, t2
    #: How the engine writes into other ranks' memory: ``store`` (plain stores into a
    #: shared window), ``put`` (MPI_Put), or ``""`` (no one-sided writes: sync, central).
    write_path = ""

    def solve(self, prob: LayerProblem,
              trace: LayerTrace | None = None) -> tuple[np.ndarray, SolveStats]:
        """Return this rank's ``O_m`` for the layer and what the solve measured.

        With a ``trace``, also record every activation (iteration), the engine's
        layer-start phases and the snapshots into it (:mod:`dssfn_mpi.engines.trace`).
        """
        raise NotImplementedError

    def auto_penalty(self, layer: int, stats: np.ndarray) -> float | np.ndarray:
        """The ``auto`` penalty of ``layer`` from this rank's ``stats``.

        ``stats`` is ``[lam_m, s_m, g_m]`` (:func:`dssfn_mpi.ssfn.solver.penalty_stats`):
        the node's own multiplier and the mean nonzero and largest eigenvalues
        of its ``G_m``. Every engine combines them over the ranks it
        talks to anyway (see :func:`dssfn_mpi.ssfn.solver.auto_penalty`).
        """
        raise NotImplementedError

    def metric(self, layer: int, G: np.ndarray) -> Any:
        """The penalty's metric for ``layer`` from this rank's ``G_m`` (``--metric gram``).

        Every engine forms it from what it exchanges anyway: sync averages the
        ``G_m`` over the ranks (one allreduce; sync-graph by its mixing), async
        agrees one metric per edge with each neighbour (one neighbourhood
        allgather). None where the engine has no metric form.
        """
        return None

    def metric_penalty(self, ratio: float) -> float | np.ndarray:
        """The ``auto`` penalty of a layer solved in the metric, by the algorithm's rule
        (:func:`~dssfn_mpi.ssfn.solver.metric_penalty`) from the graph and ``ratio``, the
        layer's width over the mean samples per node
        (:func:`~dssfn_mpi.ssfn.solver.width_ratio`)."""
        return self.alg.metric_penalty(self.ctx.graph, self.ctx.rank, ratio)

    def close(self) -> None:
        """Release communication resources (collective)."""
