"""The simulated layer loop: set-up, features, penalty, solve, observation, run log.

What every live rank does per layer (:mod:`dssfn_mpi.train`), for all M nodes
in one process, with the layer-start timeline of the replay (docs/REPLAY.md):
a node's layer starts when its own previous layer ended; then its features
and penalty compute; the ``auto`` penalty's exchange of two numbers (async:
one neighbour exchange; sync: an allreduce; sync-graph: ``mix_rounds``
neighbour rounds); async from the third layer on, the parity wait (every
neighbour left layer l-2, plus alpha); the factorisation; then the solve
(:mod:`.asyncsim`, :mod:`.syncsim`, or :mod:`.schedule` for a traced run's reads).
"""

from __future__ import annotations

import math
import resource
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .. import gramstats
from ..config import TrainConfig
from ..engines.sync_graph import MIX_TOLERANCE
from ..engines.updates import EdgeStep
from ..equivalence import check_fields
from ..errors import UserError, require
from ..gramstats import ONESHOT_MODES, StatsLayout, stats_rounds
from ..model import accuracy, layer_features
from ..network import Network, allreduce_seconds
from ..replay import exchange_end
from ..solver import LocalInverse, exact_solve
from ..stoprule import REASONS, NodeCheck
from .asyncsim import NodeRun, solve_async, staleness
from .nodes import layer_problems, load_shards, penalties
from .oneshotsim import pack_statistics, solve_oneshot
from .schedule import bounded_delay_times, node_runs, replay_reads
from .speed import SpeedModel
from .syncsim import hop_matrix, solve_sync

__all__ = ["SIM_MODES", "SimOptions", "SimResult", "simulate", "solve_layer"]

#: The modes simulate runs (central has no decentralized timeline).
SIM_MODES = ("async", "sync", "sync-graph") + ONESHOT_MODES
#: The auto penalty exchanges two float64 numbers per node.
PENALTY_BYTES = 16


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
        The message model (:func:`dssfn_mpi.network.parse_network`).
    allreduce : str
        Whose allreduce algorithm the sync engine's collective costs:
        ``mpich`` or ``openmpi`` (:func:`dssfn_mpi.network.allreduce_seconds`).
    schedule : tuple or None
        ``(path, versions)``: a traced async run's ``/trace/versions``
        (L, M, K, D) to re-execute instead of the simulated reads.
    """

    nodes: int
    speed: SpeedModel
    network: Network
    allreduce: str = "mpich"
    schedule: tuple[str, np.ndarray] | None = None


@dataclass
class SimResult:
    """What :func:`simulate` produced (also written to the run log)."""

    attrs: dict[str, Any]
    layers: dict[str, np.ndarray]
    ranks: dict[str, np.ndarray]
    extra: dict[str, np.ndarray]
    Os: list[list[np.ndarray]]  # Os[m][l]


def _peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _check(cfg: TrainConfig, opts: SimOptions) -> None:
    require(cfg.mode in SIM_MODES, f"--mode {cfg.mode!r}: simulate runs {', '.join(SIM_MODES)}")
    require(cfg.update == "edge" or cfg.mode != "async",
            "--update paper: simulate runs the edge form only")
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
        No per-layer progress line.

    Returns
    -------
    SimResult

    Raises
    ------
    UserError
        Bad settings, an impossible graph, a missing dataset, an unwritable output.
    """
    from ..engines.kernels import compiled_status
    from ..runlog import check_output_path, software_versions
    from ..runstate import make_graph, rank_table, run_attributes

    _check(cfg, opts)
    M, net = opts.nodes, opts.network
    graph = make_graph(cfg, M)
    for path in (cfg.out, cfg.save_model):
        if path is not None:
            check_output_path(path, cfg.overwrite)
    wall0, start_time = time.perf_counter(), datetime.now(timezone.utc).isoformat()
    shards = load_shards(cfg, M)
    Q = shards.n_classes
    hidden, eps = cfg.width_and_bound(Q)
    rule = cfg.stop_rule
    rounds = (cfg.mix_rounds or graph.mixing_rounds(MIX_TOLERANCE)
              if cfg.mode == "sync-graph" else 0)
    if cfg.mode == "oneshot-graph":
        rounds = stats_rounds(graph, cfg.mix_tol, cfg.mix_rounds)
    neighbors = [tuple(graph.neighbors(m)) for m in range(M)]
    hops = hop_matrix(graph)
    auto = ((cfg.gamma if cfg.mode == "async" else cfg.rho) == "auto"
            and cfg.mode not in ONESHOT_MODES)
    tt = [float(np.vdot(T, T)) for T in shards.T]
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
        "sim_allreduce": opts.allreduce if cfg.mode in ("sync", "oneshot") else "",
        "sim_schedule": opts.schedule[0] if opts.schedule else "",
    }
    ranks = rank_table(graph, shards.sizes)
    rows: list[list[dict[str, float]]] = []
    checks_rows: dict[str, list[np.ndarray]] = {k: [] for k in
                                                ("rel_distance", "objective_gap",
                                                 "consensus_spread", "lambda_star")}
    layer_end: list[np.ndarray] = []
    Os_all: list[list[np.ndarray]] = [[] for _ in range(M)]
    Ys, Yts, Os, prev_Os = list(shards.X), [shards.Xt] * M, None, None
    t_prev = np.zeros(M)
    for layer in range(cfg.layers + 1):
        d = Ys[0].shape[0] if layer == 0 else hidden
        need_target = cfg.check or rule.needs_target and cfg.mode not in ONESHOT_MODES
        G_sum = np.zeros((d, d)) if need_target else None
        probs = layer_problems(cfg, shards, layer, hidden, eps, Ys, Os, G_sum)
        pens = penalties(cfg, graph, layer, [p.stats for p in probs], rounds)
        target = None
        if need_target:
            B_sum = np.sum(np.stack([p.B for p in probs]), axis=0)
            target = exact_solve(G_sum, B_sum, eps)
        if cfg.mode in ONESHOT_MODES:  # the nodes' packed statistics instead of inverses
            invs, factor_cpu = pack_statistics(probs, StatsLayout(d, Q))
        else:
            invs, factor_cpu = _factorise(cfg, probs, pens)
        measured = np.column_stack([[p.features_cpu for p in probs],
                                    [p.penalty_cpu for p in probs], factor_cpu])
        phases = opts.speed.phases(layer, measured)
        begin = _layer_begin(cfg.mode, auto, t_prev, phases, hops, rounds, net, M,
                             opts.allreduce, layer_end, neighbors)
        nbytes = gramstats.message_bytes(cfg.mode, Q, d)
        B2s = [2.0 * p.B for p in probs]
        runs, all_done = solve_layer(cfg, opts, layer, invs, B2s, pens, eps, target, rule,
                                     begin, rounds, hops, neighbors, nbytes, graph)
        Os = [r.O.copy() for r in runs]
        t_start = t_prev
        for m in range(M):
            Os_all[m].append(Os[m])
        t_prev = np.array([r.end for r in runs])
        layer_end.append(t_prev)
        # Observation (untimed, as live): accuracy, cost, the equivalence check.
        if cfg.evaluate and layer > 0:
            Yts = [layer_features(Os_prev, cfg.seed, layer, hidden, Yt)[0]
                   for Os_prev, Yt in zip(prev_Os, Yts)]
        row_layer = []
        for m, (run, p) in enumerate(zip(runs, probs)):
            row = _row(cfg, run, phases[m], begin[m], t_start[m], pens[m], neighbors[m],
                       nbytes, rounds, rule.reason(all_done))
            resid = shards.T[m] - Os[m] @ p.Y
            row.update(train_cost=float(np.vdot(resid, resid)),
                       train_accuracy=accuracy(Os[m], p.Y, shards.y[m]),
                       test_accuracy=(accuracy(Os[m], Yts[m], shards.yt) if cfg.evaluate
                                      else math.nan))
            if not cfg.evaluate:
                row["train_accuracy"] = math.nan
            row_layer.append(row)
        rows.append(row_layer)
        if cfg.check:
            for k, v in check_fields(G_sum, B_sum, sum(tt), np.stack(Os), target).items():
                checks_rows[k].append(v)
        prev_Os = Os
        Ys = [p.Y for p in probs]
        del probs, invs, G_sum
        if not quiet:
            _progress(cfg, layer, runs, checks_rows, rule.reason(all_done), layer_end)
        result = _result(attrs, rows, checks_rows, ranks, layer_end, Os_all, wall0,
                         complete=layer == cfg.layers)
        if cfg.out is not None:
            _write(cfg.out, result)
    if cfg.save_model is not None:
        _save_model(cfg, shards, hidden, M, Os_all)
    return result


def _factorise(cfg: TrainConfig, probs, pens) -> tuple[list[LocalInverse], np.ndarray]:
    """Each node's local inverse of the layer and the CPU seconds it took (its factor phase)."""
    invs, factor_cpu = [], np.empty(len(probs))
    for m, p in enumerate(probs):
        c0 = time.thread_time()
        shift = float(np.sum(pens[m])) if cfg.mode == "async" else float(pens[m])
        invs.append(LocalInverse(p.Y, shift, p.G))
        factor_cpu[m] = time.thread_time() - c0
        p.G = None
    return invs, factor_cpu


def _layer_begin(mode: str, auto: bool, t_prev: np.ndarray, phases: np.ndarray,
                 hops: np.ndarray, rounds: int, net: Network, M: int, library: str,
                 layer_end: list[np.ndarray], neighbors: list[tuple[int, ...]]) -> np.ndarray:
    """When each node's solve begins (the layer-start rules of docs/REPLAY.md)."""
    ready = t_prev + phases[:, 0] + phases[:, 1]
    if auto:
        if mode == "sync":
            ready = np.full(M, ready.max() + allreduce_seconds(net, M, PENALTY_BYTES, library))
        else:
            ready = exchange_end(ready, hops, 1 if mode == "async" else rounds,
                                 net.message_seconds(PENALTY_BYTES))
    if mode == "async" and len(layer_end) >= 2:
        older = layer_end[-2]
        parity = np.array([max((older[n] for n in nb), default=-np.inf) for nb in neighbors])
        ready = np.maximum(ready, parity + net.alpha)
    return ready + phases[:, 2]


def solve_layer(cfg: TrainConfig, opts: SimOptions, layer: int, invs, B2s, pens, eps,
                target, rule, begin, rounds, hops, neighbors, message_bytes,
                graph) -> tuple[list[NodeRun], bool]:
    """Simulate one layer's solve in ``cfg.mode``: each node's run and whether all were done.

    ``invs``, ``B2s`` and ``pens`` are each node's local inverse, ``2 B_m`` and
    penalty (async: one gamma per neighbour, in the order of ``neighbors``);
    ``target`` the layer's exact solution (or None) and ``rule`` its stopping rule.
    """
    M, net = opts.nodes, opts.network
    O_star = None if target is None else target.O
    if cfg.mode in ONESHOT_MODES:  # invs: the nodes' packed statistics
        Q, d = B2s[0].shape
        return solve_oneshot(layer, cfg.mode, graph, StatsLayout(d, Q), invs, eps, begin,
                             rounds, opts.speed, net, opts.allreduce, hops), True
    if cfg.mode == "async":
        steps = [EdgeStep(B2s[m], pens[m], cfg.eta, eps, invs[m]) for m in range(M)]
        checks = [None if rule.fixed else
                  NodeCheck(rule, target=O_star, B2=B2s[m], gamma=pens[m], eta=cfg.eta)
                  for m in range(M)]
        if opts.schedule is not None:
            path, versions = opts.schedule
            require(layer < versions.shape[0], f"{path}: its trace has no layer {layer}")
            final, cpu = replay_reads(steps, neighbors, versions[layer], path)
            put = net.message_seconds(message_bytes)
            K = cpu.shape[1]
            cost = np.array([[opts.speed.activation(layer, m, k, cpu[m, k]) for k in range(K)]
                             for m in range(M)]) + put
            start, end = bounded_delay_times(begin, cost, neighbors, cfg.max_lead)
            return node_runs(final, start, end, cost, put, versions[layer], neighbors,
                             begin), False
        res = solve_async(layer, steps, checks, neighbors, begin, rule, cfg.iters,
                          cfg.max_lead, opts.speed, net, message_bytes)
        return res.nodes, res.all_done
    checks = [None if rule.fixed else NodeCheck(rule, target=O_star) for _ in range(M)]
    return solve_sync(layer, cfg.mode, graph, invs, B2s, [float(p) for p in pens], eps, checks,
                      begin, rule, cfg.iters, rounds, opts.speed, net, message_bytes,
                      opts.allreduce, hops)


def _row(cfg: TrainConfig, run: NodeRun, phases: np.ndarray, begin: float, t0: float,
         pen, nbrs: tuple[int, ...], message_bytes: int, rounds: int,
         reason: int) -> dict[str, float]:
    """One node's log row of a layer (simulated seconds)."""
    dm = len(nbrs)
    row: dict[str, float] = {
        "total_seconds": run.end - t0,
        "cpu_seconds": float(phases.sum()) + run.compute,
        "features_seconds": float(phases[0]),
        "factor_seconds": begin - t0 - float(phases[0]),
        "solve_seconds": run.end - begin,
        "wait_seconds": run.wait,
        "eval_seconds": math.nan,
        "activations": run.activations,
        "stop_reason": -1 if cfg.mode in ONESHOT_MODES else reason,
        "gamma": float(np.mean(pen)),
        "mix_rounds": rounds if cfg.mode in ("sync-graph", "oneshot-graph") else -1,
        "waits_slept": 0,
    }
    if cfg.mode == "async":
        mean, worst = staleness(run.versions, dm)
        row.update(puts=run.activations * dm, bytes_sent=run.activations * dm * message_bytes,
                   staleness_mean=mean, staleness_max=worst, torn_retries=0, fallbacks=0)
    elif cfg.mode in ("sync", "oneshot"):
        row.update(puts=0, bytes_sent=run.activations * message_bytes, torn_retries=-1,
                   fallbacks=-1)
    else:
        row.update(puts=0, bytes_sent=run.activations * rounds * dm * message_bytes,
                   torn_retries=-1, fallbacks=-1)
    return row


def _result(attrs, rows, checks_rows, ranks, layer_end, Os_all, wall0,
            complete: bool) -> SimResult:
    from .. import schema

    missing = {k: (-1 if schema.layer_field(k).dtype == np.int64 else math.nan)
               for k in schema.names(schema.ENGINE, schema.LOOP)}
    layers = {k: np.array([[r.get(k, missing[k]) for r in row] for row in rows])
              for k in missing}
    for k, v in checks_rows.items():
        if v:
            layers[k] = np.array(v)
    ends = np.array(layer_end)
    out = {**attrs, "complete": complete, "layers_done": len(rows),
           "sim_total_seconds": float(ends[-1].max()),
           "sim_wall_seconds": time.perf_counter() - wall0,
           "sim_peak_rss_bytes": _peak_rss_bytes()}
    if complete:
        out["end_time"] = datetime.now(timezone.utc).isoformat()
    return SimResult(attrs=out, layers=layers, ranks=ranks, extra={"sim_layer_end": ends},
                     Os=Os_all)


def _write(path: str, result: SimResult) -> None:
    from ..runlog import write_runlog

    write_runlog(path, result.attrs, result.layers, result.ranks, result.extra, overwrite=True,
                 trace_attrs={"recorded": False,
                              "why": "simulated run: its times are in /layers and "
                                     "/extra/sim_layer_end"})


def _save_model(cfg: TrainConfig, shards, hidden: int, M: int,
                Os_all: list[list[np.ndarray]]) -> None:
    import json

    from ..modelio import save_model

    attrs = {"dataset": shards.name, "n_features": shards.X[0].shape[0],
             "n_classes": shards.n_classes, "hidden": hidden, "layers": cfg.layers,
             "seed": cfg.seed, "nodes": M, "mode": cfg.mode,
             "config": json.dumps(cfg.to_dict()), "simulated": True}
    save_model(cfg.save_model, attrs, Os_all)


def _progress(cfg: TrainConfig, layer: int, runs: list[NodeRun], checks_rows, reason: int,
              layer_end: list[np.ndarray]) -> None:
    done = float(layer_end[-1].max()) - (float(layer_end[-2].max()) if len(layer_end) > 1
                                         else 0.0)
    acts = np.mean([r.activations for r in runs])
    rel = checks_rows["rel_distance"][-1].max() if checks_rows["rel_distance"] else math.nan
    stop = "-" if cfg.mode in ONESHOT_MODES else REASONS[reason]
    print(f"layer {layer:>3}/{cfg.layers}  {cfg.mode:<10} simulated {done:10.4f} s  "
          f"activations {acts:7.1f}  max rel dist {rel:.2e}  stop {stop}",
          file=sys.stdout, flush=True)


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
    values = config_from_mapping(run.config, f"--schedule {path}")
    cfg = TrainConfig(**values)
    if cfg.mode != "async":
        return cfg, run.nodes, np.zeros((0,))
    versions = (getattr(run, "trace", None) or {}).get("versions")
    if versions is None:
        raise UserError(f"--schedule {path}: no /trace/versions (written with --trace-limit 0 "
                        "or an older version); rerun it")
    require(cfg.stop_rule.fixed, f"--schedule {path}: only --stop iters runs can be "
            "re-executed (their activation count is fixed)")
    return cfg, run.nodes, np.asarray(versions, dtype=np.int64)
