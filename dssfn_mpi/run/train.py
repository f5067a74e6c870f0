"""The layer loop every rank runs: features -> penalty -> solve -> observers.

Per layer l (docs/ALGORITHMS.md, Algorithm 1 of the paper):

1. features: ``Y_l = relu([O_{l-1} Y_{l-1}; -O_{l-1} Y_{l-1}; colnorm(R_l Y_{l-1})])`` from
   this rank's own ``O_{l-1}`` (:func:`dssfn_mpi.run.layerstep.layer_inputs`), and the
   statistics ``G_m, B_m``;
2. the layer's ADMM penalty, as configured or ``auto`` from the data;
3. the engine solves the decentralized layer problem;
4. untimed observation, the run's pipeline of observers (:mod:`dssfn_mpi.run.observers`):
   accuracy, centralized equivalence, the log rows, checkpoint, progress line and run log.

Steps 1-3 are timed. What a step computes and records is shared with the
simulator (:mod:`dssfn_mpi.run.layerstep`); what the run adds up to is rank 0's
:class:`~dssfn_mpi.runlog.RunLog` (:meth:`dssfn_mpi.run.runstate.RunState.record`).
Set-up (validation, shards, defaults, resume) is
:func:`dssfn_mpi.run.runstate.prepare_run`. Logging observes; it never feeds back
into training.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import TrainConfig
from ..drivers import Penalty
from ..engines.base import Engine, LayerProblem
from ..engines.trace import trace_plan
from ..errors import InjectedFailure
from ..ssfn.equivalence import exact_target
from ..ssfn.solver import penalty_stats, width_ratio
from .layerstep import aims_at_target, layer_inputs, layer_row, metric_bytes
from .observers import LayerStep, Pipeline, default_observers
from .runstate import RunState, prepare_run, root_call

if TYPE_CHECKING:
    from ..runlog import RunLog

__all__ = ["root_call", "run_training"]


def run_training(
    cfg: TrainConfig,
    comm: Any,
    command_line: str = "",
    quiet: bool = False,
    resume: bool = False,
) -> RunLog | None:
    """Train a decentralized SSFN with one rank per graph node.

    Parameters
    ----------
    cfg : TrainConfig
        Settings; validated here on every rank before any MPI work.
    comm : mpi4py.MPI.Comm
        One rank per graph node.
    command_line : str
        Recorded in the run log.
    quiet : bool
        Suppress rank 0's per-layer progress lines.
    resume : bool
        Continue after the last layer every rank has checkpointed beside
        ``cfg.out`` (see :mod:`dssfn_mpi.run.checkpoint`).

    Returns
    -------
    RunLog or None
        On rank 0, the run's record, as its run log holds it (without the
        trace groups); ``None`` elsewhere.
    """
    state = prepare_run(cfg, comm, command_line, resume)
    engine = cfg.algorithm.driver.engine(state.context())
    if state.rank == 0:
        state.attrs["rma_write_path"] = engine.write_path
    watch = _put_watchdog(state, engine)
    observers = default_observers(state, quiet)  # checked: each stage after what it reads
    state.barrier("start")  # common start line for the timings, outside every layer
    t_run = time.perf_counter()  # also the origin of the run log's traces
    # No try/finally around the loop: closing an engine is collective, and a rank
    # that failed must reach MPI_Abort (in the CLI) instead of waiting in it.
    _layer_loop(state, engine, observers, t_run)
    if watch is not None:
        watch.stop()
    engine.close()
    wall = time.perf_counter() - t_run
    if state.rank == 0:
        state.attrs.update(end_time=datetime.now(timezone.utc).isoformat(), wall_seconds=wall)
    observers.finish()
    if state.rank != 0:
        return None
    return state.record(complete=True)


def _layer_loop(state: RunState, engine: Engine, observers: Pipeline,
                origin: float) -> None:
    """Solve layers ``state.first .. L``: features -> penalty -> solve (timed) -> observers.

    Each layer is traced (:mod:`dssfn_mpi.engines.trace`) with times relative to ``origin``.
    """
    cfg, T, eps = state.cfg, state.T, state.eps
    Y, O = state.Y, (state.Os[-1] if state.Os else None)
    plan, degree = trace_plan(cfg, state.graph), state.graph.degree(state.rank)
    aim = aims_at_target(cfg)
    for layer in range(state.first, state.n_layers):
        _inject_failure(cfg, state.rank, layer)
        trace = plan.layer_trace(degree, origin)
        c0, t0, tc0 = time.process_time(), time.perf_counter(), time.thread_time()
        O_prev = O
        Y, G, B = layer_inputs(O_prev, cfg.seed, layer, state.hidden, Y, T)
        t1, tc1 = time.perf_counter(), time.thread_time()
        # The metric's exchange and factorisation count in the layer's time, as the penalty's.
        metric = engine.metric(layer, G) if cfg.metric_at(layer) else None
        penalty = _penalty(cfg, engine, layer, Y, T, G, eps,
                           state.meta["shard_sizes"] if metric is not None else None)
        tp, tcp = time.perf_counter(), time.thread_time()
        t_penalty = tp - t1
        if trace is not None:
            trace.phase("features", t0, t1, tc1 - tc0)
            trace.phase("penalty", t1, tp, tcp - tc1)
        # --stop eps: O* before the solve, outside the layer's timings (an oracle of the
        # benchmark, not a cost of the method).
        target, untimed, untimed_cpu = None, 0.0, 0.0
        if aim:
            ta, ca = time.perf_counter(), time.process_time()
            target = exact_target(state.comm, G, B, eps, state.wait_policy, cfg.timeout)
            untimed, untimed_cpu = time.perf_counter() - ta, time.process_time() - ca
        problem = LayerProblem(layer=layer, Y=Y, T=T, G=G, B=B, eps=eps, penalty=penalty,
                               metric=metric, target=target)
        O, solved = engine.solve(problem, trace)
        t2, cpu = time.perf_counter(), time.process_time() - c0 - untimed_cpu
        row = layer_row(solved, t1 - t0, t_penalty, t2 - t0 - untimed, cpu, penalty,
                        metric_bytes(cfg.algorithm, G.shape[0], metric is not None))
        state.Os.append(O)
        step = LayerStep(problem=problem, O=O, O_prev=O_prev, row=row, solved_at=t2,
                         trace=trace)
        observers.after_layer(step)


def _put_watchdog(state: RunState, engine: Engine):
    """A :class:`~dssfn_mpi.run.watchdog.PutWatchdog` over the async engine's puts (collective)."""
    mailbox = getattr(engine, "mailbox", None)
    if mailbox is None or state.size < 2:
        return None
    from .watchdog import PutWatchdog

    return PutWatchdog(state.comm, mailbox, state.graph.neighbors(state.rank),
                       state.cfg.timeout, state.cfg.out)


def _inject_failure(cfg: TrainConfig, rank: int, layer: int) -> None:
    if cfg.fail_at is None:
        return
    fail_rank, fail_layer, how = cfg.fail_at
    if (rank, layer) != (fail_rank, fail_layer):
        return
    if how == "kill":
        import signal

        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFailure(f"injected failure in layer {layer} (--fail-at)")


def _penalty(cfg: TrainConfig, engine: Engine, layer: int, Y: np.ndarray, T: np.ndarray,
             G: np.ndarray, eps: float, metric_shards: list[int] | None) -> float | np.ndarray:
    """The layer's ADMM penalty: as configured, or ``auto`` from the data.

    ``auto`` costs an estimate of the node's own multiplier and the engine's
    combination of it over the ranks it talks to anyway (async: its neighbours;
    sync: everyone), before the layer's solve, never inside it. In the metric
    (``metric_shards``: every rank's shard size) it is the engine's rule of the metric
    form instead, from the graph and the width over the mean shard size.
    """
    fixed = cfg.penalty_at(layer)
    source = cfg.algorithm.driver.penalty_source(fixed, metric_shards is not None)
    if source is Penalty.NONE:  # solved exactly: no penalty
        return float("nan")
    if source is Penalty.FIXED:
        return fixed
    if source is Penalty.METRIC:
        return engine.metric_penalty(width_ratio(Y.shape[0], metric_shards))
    return engine.auto_penalty(layer, penalty_stats(Y, T, G, eps))
