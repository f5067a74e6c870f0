"""The simulated layer loop: set-up, features, penalty, solve, observation, run log.

What every live rank does per layer (:mod:`dssfn_mpi.run.train`), for all M nodes
in one process, by the step's shared rules (:mod:`dssfn_mpi.run.layerstep`):
features, penalty and factorisation, placed in time by the
layer-start rule of :mod:`dssfn_mpi.analysis.timeline` (the replay's, docs/REPLAY.md);
then the solve (:mod:`.asyncsim`, :mod:`.lockstepsim`, :mod:`.syncsim`, or
:mod:`.schedule` for a traced run's reads); then the untimed observation (accuracy, cost, the
equivalence check) and the run's record, a :class:`~dssfn_mpi.runlog.RunLog` as
training's (:class:`SimResult`), written as its run log.
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..algorithms import lookup, names
from ..analysis.network import Network
from ..analysis.timeline import TimingModel, hop_distances, neighbor_table
from ..config import TrainConfig
from ..drivers import Penalty
from ..engines.base import SolveStats
from ..engines.staleness import staleness
from ..errors import UserError, require
from ..graph.topology import facts_line
from ..run.layerstep import (
    aims_at_target,
    layer_row,
    metric_bytes,
    progress_line,
)
from ..runlog import RunLog, schema
from ..ssfn.equivalence import check_fields
from ..ssfn.gramstats import StatsLayout
from ..ssfn.model import accuracy
from ..ssfn.solver import exact_solve, width_ratio
from .asyncsim import NodeRun
from .nodes import layer_metrics, layer_problems, load_shards, penalties
from .speed import SpeedModel
from .testset import TestSet

__all__ = ["SIM_MODES", "SimOptions", "SimResult", "SolveContext", "simulate", "solve_layer"]

#: The modes simulate runs (every decentralized algorithm; central has no timeline).
SIM_MODES = tuple(n for n in names() if lookup(n).decentralized)

#: The run log's ``/trace`` attributes of a simulated run (no per-activation trace).
_TRACE_ATTRS = {"recorded": False,
                "why": "simulated run: its times are in /layers and /extra/sim_layer_end"}


@dataclass
class SimOptions:
    """The simulation's own settings (the method's are a :class:`TrainConfig`).

    Attributes
    ----------
    nodes : int
        M, simulated nodes.
    speed : SpeedModel
        Compute seconds (:mod:`.speed`).
    network : Network
        The message model (:func:`dssfn_mpi.analysis.network.parse_network`).
    allreduce : str
        Whose allreduce algorithm the sync engine's collective costs:
        ``mpich`` or ``openmpi`` (:func:`dssfn_mpi.analysis.network.allreduce_seconds`).
    schedule : tuple or None
        ``(path, versions)``: a traced async run's ``/trace/versions``
        (L, M, K, D) to re-execute instead of the simulated reads.
    heartbeat : float
        Seconds of wall time between the progress lines inside a long layer
        (:class:`~.heartbeat.Heartbeat`; 0: none, as under ``quiet``).
    """

    nodes: int
    speed: SpeedModel
    network: Network
    allreduce: str = "mpich"
    schedule: tuple[str, np.ndarray] | None = None
    heartbeat: float = 60.0


@dataclass
class SolveContext:
    """What one layer's simulated solve needs of the run (``bench penalty`` builds one too)."""

    cfg: TrainConfig
    opts: SimOptions
    graph: Any
    eps: float
    rounds: int  # mixing rounds per exchange (0: none)
    neighbors: list[tuple[int, ...]]
    hops: np.ndarray  # hop distances between the nodes

    @property
    def rule(self) -> Any:
        """The layers' :class:`~dssfn_mpi.algorithms.stoprule.StopRule`."""
        return self.cfg.stop_rule


@dataclass
class SimResult(RunLog):
    """What :func:`simulate` produced: the run's record, as its run log holds it, and
    every node's solutions (``Os[m][l]``)."""

    Os: list[list[np.ndarray]] = field(default_factory=list)


def _peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _check(cfg: TrainConfig, opts: SimOptions) -> None:
    sim_modes = [n for n in names() if lookup(n).decentralized]
    require(lookup(cfg.mode).decentralized,
            f"--mode {cfg.mode!r}: simulate runs {', '.join(sim_modes)}")
    require(opts.nodes >= 2, f"--nodes {opts.nodes}: simulate needs at least 2 nodes")
    cfg.validate(opts.nodes)


def simulate(cfg: TrainConfig, opts: SimOptions, command_line: str = "",
             quiet: bool = False) -> SimResult:
    """Simulate a whole run (layers 0..L) and write its run log (``cfg.out``).

    Parameters
    ----------
    cfg : TrainConfig
        The method's settings, as for ``train``.
    opts : SimOptions
        M, speed and network models, and optionally a traced schedule.
    command_line : str
        Recorded in the run log.
    quiet : bool
        No start line (M, mode and the graph's facts), no progress lines (per layer, and
        inside a long layer).

    Returns
    -------
    SimResult

    Raises
    ------
    UserError
        Bad settings, an impossible graph, a missing dataset, an unwritable output.
    """
    _check(cfg, opts)
    if quiet:
        opts = dataclasses.replace(opts, heartbeat=0.0)
    run = _setup(cfg, opts, command_line)
    M = opts.nodes
    if not quiet:
        print(f"simulating {M} nodes, {cfg.mode}: graph {facts_line(run.attrs)}", flush=True)
    rec = _Record(Os=[[] for _ in range(M)], rows=schema.blank_rows((cfg.layers + 1, M)))
    Ys, Os, prev_Os = list(run.shards.X), None, None
    tests = TestSet(run.shards.Xt, run.shards.yt if cfg.evaluate else run.shards.yt[:0], M,
                    cfg.seed, run.hidden)
    t_prev = np.zeros(M)
    for layer in range(cfg.layers + 1):
        lay = _run_layer(run, layer, Ys, Os, t_prev, rec.layer_end)
        Os = [r.O.copy() for r in lay.runs]
        t_start, t_prev = t_prev, np.array([r.end for r in lay.runs])
        # Observation (untimed, as live): accuracy, cost, the equivalence check.
        rec.add(run, layer, lay, Os,
                tests.accuracies(layer, Os, prev_Os, keep=layer < cfg.layers), t_start, t_prev)
        prev_Os = Os
        Ys = [p.Y for p in lay.probs]
        del lay
        if not quiet:
            _progress(cfg, layer, rec, time.perf_counter() - run.wall0,
                      time.process_time() - run.cpu0)
        result = _result(run, rec, complete=layer == cfg.layers)
        if cfg.out is not None:
            result.write(cfg.out)
    if cfg.save_model is not None:
        from ..ssfn.modelio import save_run_model

        shards = run.shards
        save_run_model(cfg, shards.name, shards.X[0].shape[0], shards.n_classes, run.hidden,
                       rec.Os, simulated=True)
    return result


@dataclass
class _Setup:
    """What stays fixed over a simulated run: data, graph, timing model, run attributes."""

    cfg: TrainConfig
    opts: SimOptions
    graph: Any
    shards: Any
    hidden: int
    eps: float
    rule: Any  # the layers' StopRule
    rounds: int  # sync-graph's and oneshot-graph's mixing rounds (0 otherwise)
    neighbors: list[tuple[int, ...]]
    timing: TimingModel
    attrs: dict[str, Any]
    ranks: dict[str, np.ndarray]
    tt: list[float]  # each node's ||T_m||^2, for the equivalence check
    wall0: float
    cpu0: float  # process CPU seconds at the start


def _setup(cfg: TrainConfig, opts: SimOptions, command_line: str) -> _Setup:
    """The graph, the shards, the data-dependent defaults and the run's attributes."""
    from ..algorithms.kernels import compiled_status
    from ..run.runstate import make_graph, rank_table, run_attributes
    from ..runlog import check_output_path, software_versions

    M, net = opts.nodes, opts.network
    graph = make_graph(cfg, M)
    for path in (cfg.out, cfg.save_model):
        if path is not None:
            check_output_path(path, cfg.overwrite)
    wall0, start_time = time.perf_counter(), datetime.now(timezone.utc).isoformat()
    cpu0 = time.process_time()
    shards = load_shards(cfg, M)
    Q = shards.n_classes
    hidden, eps = cfg.width_and_bound(Q)
    rule, alg = cfg.stop_rule, cfg.algorithm
    rounds = alg.mix_rounds(graph, cfg.mix_rounds, cfg.mix_tol)
    neighbors = [tuple(graph.neighbors(m)) for m in range(M)]
    timing = TimingModel(
        mode=cfg.mode, neighbors=neighbor_table(neighbors), hops=hop_distances(neighbors),
        network=net, mix_rounds=rounds, allreduce=opts.allreduce,
        auto_penalty=alg.driver.penalty_source(cfg.penalty_at(0), False) is Penalty.AUTO)
    attrs = {
        **run_attributes(cfg, graph, shards.name, Q, hidden, eps, command_line),
        "shard_sizes": np.array(shards.sizes, dtype=np.int64),
        "start_time": start_time,
        **software_versions(),
        "compiled_kernels": compiled_status(),  # the engine's own step, compiled or not
        "mpi_library": "",
        "simulated": True,
        "sim_speed": opts.speed.description,
        "sim_network": f"{net.name} (alpha {net.alpha:g} s, beta {net.beta:g} B/s)",
        "sim_allreduce": opts.allreduce if alg.collective else "",
        "sim_schedule": opts.schedule[0] if opts.schedule else "",
    }
    return _Setup(cfg=cfg, opts=opts, graph=graph, shards=shards, hidden=hidden, eps=eps,
                  rule=rule, rounds=rounds, neighbors=neighbors, timing=timing, attrs=attrs,
                  ranks=rank_table(graph, shards.sizes),
                  tt=[float(np.vdot(T, T)) for T in shards.T], wall0=wall0, cpu0=cpu0)


@dataclass
class _Layer:
    """One simulated layer: its problems, penalties, exact solution, times and runs."""

    probs: list[Any]
    pens: list[Any]
    G_sum: np.ndarray | None
    B_sum: np.ndarray | None
    target: Any
    phases: np.ndarray  # (M, 3) seconds: features, penalty, factor
    begin: np.ndarray  # (M,) when each node's solve began
    message_bytes: int
    runs: list[NodeRun]
    all_done: bool
    metric_bytes: int = 0  # sent to each neighbour to form the Gram metric (0: scalar penalty)


def _run_layer(run: _Setup, layer: int, Ys: list[np.ndarray], Os: list[np.ndarray] | None,
               t_prev: np.ndarray, layer_end: list[np.ndarray]) -> _Layer:
    """Features, penalty, factorisation and solve of one layer, placed in time."""
    cfg, opts = run.cfg, run.opts
    d = Ys[0].shape[0] if layer == 0 else run.hidden
    need_target = cfg.check or aims_at_target(cfg)
    alg = cfg.algorithm
    G_sum = (np.zeros((d, d)) if need_target or (cfg.metric_at(layer) and alg.collective)
             else None)
    layout = StatsLayout(d, run.shards.n_classes)
    packed = np.empty((len(Ys), layout.size)) if alg.exchanges_statistics else None
    grams = (np.empty((len(Ys), StatsLayout(d, 0).size))
             if cfg.metric_at(layer) and alg.mixes else None)
    probs = layer_problems(cfg, run.shards, layer, run.hidden, run.eps, Ys, Os, G_sum, packed,
                           grams)
    pens = penalties(cfg, run.graph, layer, [p.stats for p in probs], run.rounds,
                     width_ratio(d, run.shards.sizes))
    metrics = (layer_metrics(cfg, run.graph, probs, run.rounds, G_sum, grams)
               if cfg.metric_at(layer) else None)
    del grams
    target = B_sum = None
    if need_target:
        B_sum = np.sum(np.stack([p.B for p in probs]), axis=0)
        target = exact_solve(G_sum, B_sum, run.eps)
    if alg.exchanges_statistics:  # the nodes' packed statistics instead of inverses
        invs, factor_cpu = packed, np.array([p.pack_cpu for p in probs])
    else:
        invs, factor_cpu = _factorise(alg, probs, pens, metrics)
    measured = np.column_stack([[p.features_cpu for p in probs],
                                [p.penalty_cpu for p in probs], factor_cpu])
    phases = opts.speed.phases(layer, measured)
    exchange = metric_bytes(alg, d, metrics is not None)
    begin = run.timing.layer_begin(t_prev, phases,
                                   layer_end[-2] if len(layer_end) >= 2 else None, exchange)
    message_bytes = alg.message_bytes(run.shards.n_classes, d)
    B2s = [2.0 * p.B for p in probs]
    ctx = SolveContext(cfg, opts, run.graph, run.eps, run.rounds, run.neighbors,
                       run.timing.hops)
    runs, all_done = solve_layer(ctx, layer, invs, B2s, pens, metrics, target, begin,
                                 message_bytes)
    return _Layer(probs=probs, pens=pens, G_sum=G_sum, B_sum=B_sum, target=target,
                  phases=phases, begin=begin, message_bytes=message_bytes, runs=runs,
                  all_done=all_done, metric_bytes=exchange)


def _factorise(alg, probs, pens, metrics=None) -> tuple[list, np.ndarray]:
    """Each node's local inverse for its penalty (:meth:`Algorithm.inverse
    <dssfn_mpi.algorithms.Algorithm.inverse>`) and the CPU seconds it took (its factor
    phase)."""
    invs, factor_cpu = [], np.empty(len(probs))
    for m, p in enumerate(probs):
        G = p.gram()
        c0 = time.thread_time()
        invs.append(alg.inverse(p.Y, G, pens[m], None if metrics is None else metrics[m]))
        factor_cpu[m] = time.thread_time() - c0
        p.G = p.G_sent = G = None
    return invs, factor_cpu


@dataclass
class _Record:
    """The run so far: log rows, equivalence measurements, layer ends and solutions."""

    Os: list[list[np.ndarray]]  # Os[m][l]
    rows: np.ndarray  # (L + 1, M) of schema.ROW_DTYPE: rows[l, m] node m's row of layer l
    checks: dict[str, list[np.ndarray]] = field(default_factory=lambda: {
        k: [] for k in ("rel_distance", "objective_gap", "consensus_spread", "lambda_star")})
    layer_end: list[np.ndarray] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)  # 1-minute load average at layer ends

    @property
    def layers_done(self) -> int:
        """Layers recorded so far."""
        return len(self.layer_end)

    def add(self, run: _Setup, layer: int, lay: _Layer, Os: list[np.ndarray],
            test_acc: list[float], t_start: np.ndarray, t_end: np.ndarray) -> None:
        """Record a solved layer: every node's row (cost, accuracies: ``test_acc`` on the
        test set, :class:`~dssfn_mpi.sim.testset.TestSet`), stored once in ``rows``, and
        the check."""
        cfg, shards = run.cfg, run.shards
        for m in range(len(Os)):
            self.Os[m].append(Os[m])
        self.layer_end.append(t_end)
        self.loads.append(os.getloadavg()[0])
        for m, (node, p) in enumerate(zip(lay.runs, lay.probs)):
            row = _row(cfg, node, lay.phases[m], lay.begin[m], t_start[m], run.neighbors[m],
                       lay.message_bytes, run.rounds, run.rule.reason(lay.all_done),
                       lay.pens[m], lay.metric_bytes)
            resid = shards.T[m] - Os[m] @ p.Y
            schema.set_fields(row, train_cost=float(np.vdot(resid, resid)),
                              train_accuracy=(accuracy(Os[m], p.Y, shards.y[m])
                                              if cfg.evaluate else math.nan),
                              test_accuracy=test_acc[m])
            self.rows[layer, m] = row
        if cfg.check:
            for k, v in check_fields(lay.G_sum, lay.B_sum, sum(run.tt), np.stack(Os),
                                     lay.target).items():
                self.checks[k].append(v)


def solve_layer(run: SolveContext, layer: int, invs, B2s, pens, metrics, target, begin,
                message_bytes: int) -> tuple[list[NodeRun], bool]:
    """Simulate one layer's solve of the run's algorithm by its driver kind: each node's
    run and whether all were done.

    ``invs``, ``B2s`` and ``pens`` are each node's local inverse, ``2 B_m`` and
    penalty (edge penalties: one per neighbour, in the order of its neighbours);
    ``metrics`` each node's Gram metric (:func:`~dssfn_mpi.sim.nodes.layer_metrics`)
    on a layer solved in it, else None; ``target`` the layer's exact solution (or None);
    ``begin`` when each node's solve begins (:mod:`dssfn_mpi.sim.layersolve`).
    """
    return run.cfg.algorithm.driver.simulate(run, layer, invs, B2s, pens, metrics, target,
                                             begin, message_bytes)


def _row(cfg: TrainConfig, run: NodeRun, phases: np.ndarray, begin: float, t0: float,
         nbrs: tuple[int, ...], message_bytes: int, rounds: int, reason: int,
         penalty, metric_bytes: int) -> np.ndarray:
    """One node's log row of a layer (simulated seconds), but for its observation: the
    simulated solve as a :class:`~dssfn_mpi.engines.base.SolveStats`, in the shared row
    (:func:`~dssfn_mpi.run.layerstep.layer_row`)."""
    dm, alg = len(nbrs), cfg.algorithm
    puts, sent = alg.sent(run.activations, dm, rounds, message_bytes)
    mean, worst = staleness(run.versions, dm) if alg.one_sided else (math.nan, math.nan)
    stats = SolveStats(
        solve_seconds=run.end - begin, factor_seconds=begin - t0 - float(phases[0]),
        wait_seconds=run.wait, activations=run.activations, puts=puts, bytes_sent=sent,
        staleness_mean=mean, staleness_max=worst, mix_rounds=rounds if alg.mixes else -1,
        torn_retries=0 if alg.one_sided else -1, fallbacks=0 if alg.one_sided else -1,
        waits_slept=0, stop_reason=-1 if alg.direct else reason)
    return layer_row(stats, float(phases[0]), 0.0, run.end - t0,
                     float(phases.sum()) + run.compute, penalty, metric_bytes)


def _result(run: _Setup, rec: _Record, complete: bool) -> SimResult:
    """The run so far as its run log records it, with every node's solutions."""
    ends = np.array(rec.layer_end)
    attrs = {**run.attrs, "complete": complete, "layers_done": rec.layers_done,
             "sim_total_seconds": float(ends[-1].max()),
             "sim_wall_seconds": time.perf_counter() - run.wall0,
             "sim_cpu_seconds": time.process_time() - run.cpu0,
             "sim_peak_rss_bytes": _peak_rss_bytes(),
             "sim_load_average": float(np.mean(rec.loads))}
    if complete:
        attrs["end_time"] = datetime.now(timezone.utc).isoformat()
    return SimResult(attrs=attrs, layers=schema.layer_arrays(rec.rows[:rec.layers_done],
                                                             rec.checks),
                     ranks=run.ranks, extra={"sim_layer_end": ends},
                     source=run.cfg.out or "", trace_attrs=dict(_TRACE_ATTRS), Os=rec.Os)


def _progress(cfg: TrainConfig, layer: int, rec: _Record, wall: float, cpu: float) -> None:
    """The layer's progress line, then the simulation's own wall clock, CPU and memory
    peak."""
    layer_end = rec.layer_end
    done = float(layer_end[-1].max()) - (float(layer_end[-2].max()) if len(layer_end) > 1
                                         else 0.0)
    rel = rec.checks["rel_distance"][-1].max() if rec.checks["rel_distance"] else math.nan
    print(progress_line(cfg, layer, "simulated", done, rel, rec.rows[layer])
          + f"  [wall {wall:.1f} s, cpu {cpu:.1f} s, peak {_peak_rss_bytes() / 2**30:.2f} GiB, "
          f"load {rec.loads[-1]:.1f}]", file=sys.stdout, flush=True)


def load_schedule(path: str) -> tuple[TrainConfig, int, np.ndarray]:
    """A traced async run's settings, M and ``/trace/versions`` (``--schedule RUN.h5``).

    Raises
    ------
    UserError
        Missing file, not async, no versions, or a stop rule other than iters.
    """
    from pathlib import Path

    from ..config import config_from_mapping
    from ..runlog import read_runlog

    require(Path(path).is_file(), f"--schedule {path}: no such run log")
    run = read_runlog(path)
    # Runs logged before --metric existed solved every layer with the scalar penalty.
    values = config_from_mapping({"metric": "identity", **run.config}, f"--schedule {path}")
    cfg = TrainConfig(**values)
    if not cfg.algorithm.one_sided:
        return cfg, run.nodes, np.zeros((0,))
    versions = (getattr(run, "trace", None) or {}).get("versions")
    if versions is None:
        raise UserError(f"--schedule {path}: no /trace/versions (written with --trace-limit 0 "
                        "or an older version); rerun it")
    require(cfg.stop_rule.fixed, f"--schedule {path}: only --stop iters runs can be "
            "re-executed (their activation count is fixed)")
    return cfg, run.nodes, np.asarray(versions, dtype=np.int64)
