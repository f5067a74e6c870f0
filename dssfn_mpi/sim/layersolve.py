"""One layer's simulated solve, one function per driver kind (:mod:`dssfn_mpi.drivers`).

Each takes what :func:`dssfn_mpi.sim.layerloop.solve_layer` is given: the run's
:class:`~dssfn_mpi.sim.layerloop.SolveContext`, the layer, each node's local inverse (the
one-shot kind: its packed statistics), ``2 B_m``, penalty and Gram metric (or None), the
layer's exact solution (or None), when each node's solve begins and the message size; and
returns each node's :class:`~dssfn_mpi.sim.asyncsim.NodeRun` and whether all were done.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.timeline import bounded_delay, neighbor_table
from ..errors import require
from ..ssfn.gramstats import StatsLayout
from .asyncsim import NodeRun, solve_async
from .heartbeat import Heartbeat
from .lockstepsim import solve_lockstep
from .oneshotsim import solve_oneshot
from .schedule import node_runs, replay_reads
from .syncsim import solve_sync

__all__ = ["simulate_consensus", "simulate_lockstep", "simulate_one_shot",
           "simulate_one_sided"]

Result = tuple[list[NodeRun], bool]


def _checks(run: Any, B2s, pens, metrics, target) -> list:
    """Each node's own stopping test (None under a fixed iteration count)."""
    alg, rule = run.cfg.algorithm, run.rule
    O_star = None if target is None else target.O
    return [None if rule.fixed else
            alg.node_check(rule, O_star, B2s[m], pens[m], run.cfg.eta, metrics[m])
            for m in range(len(B2s))]


def _steps(run: Any, invs, B2s, pens, metrics) -> list:
    """Each node's per-neighbour step (:meth:`~dssfn_mpi.algorithms.Algorithm.step`)."""
    alg, cfg = run.cfg.algorithm, run.cfg
    return [alg.step(B2s[m], pens[m], cfg.eta, run.eps, invs[m], metrics[m])
            for m in range(len(B2s))]


def simulate_one_sided(run: Any, layer: int, invs, B2s, pens, metrics, target,
                       begin: np.ndarray, message_bytes: int) -> Result:
    """The asynchronous event loop, or a traced run's reads again (``--schedule``)."""
    cfg, opts = run.cfg, run.opts
    metrics = metrics or [None] * len(B2s)
    checks = _checks(run, B2s, pens, metrics, target)
    steps = _steps(run, invs, B2s, pens, metrics)
    if opts.schedule is not None:
        return _scheduled(run, layer, steps, begin, message_bytes), False
    res = solve_async(layer, steps, checks, run.neighbors, begin, run.rule, cfg.iters,
                      cfg.max_lead, opts.speed, opts.network, message_bytes,
                      Heartbeat(f"layer {layer} {cfg.mode}", opts.heartbeat))
    return res.nodes, res.all_done


def _scheduled(run: Any, layer: int, steps: list, begin: np.ndarray,
               message_bytes: int) -> list[NodeRun]:
    """A traced run's reads re-executed, timed by the bounded-delay rule."""
    opts, M = run.opts, len(steps)
    path, versions = opts.schedule
    require(layer < versions.shape[0], f"{path}: its trace has no layer {layer}")
    final, cpu = replay_reads(steps, run.neighbors, versions[layer], path)
    put = opts.network.message_seconds(message_bytes)
    K = cpu.shape[1]
    cost = np.array([[opts.speed.activation(layer, m, k, cpu[m, k]) for k in range(K)]
                     for m in range(M)]) + put
    start, end = bounded_delay(begin, cost, neighbor_table(run.neighbors), run.cfg.max_lead)
    return node_runs(final, start, end, cost, put, versions[layer], run.neighbors, begin)


def simulate_lockstep(run: Any, layer: int, invs, B2s, pens, metrics, target,
                      begin: np.ndarray, message_bytes: int) -> Result:
    """Jacobi rounds of the per-neighbour step, exchanged with the neighbours."""
    metrics = metrics or [None] * len(B2s)
    checks = _checks(run, B2s, pens, metrics, target)
    steps = _steps(run, invs, B2s, pens, metrics)
    return solve_lockstep(run, layer, steps, checks, begin, message_bytes)


def simulate_consensus(run: Any, layer: int, invs, B2s, pens, metrics, target,
                       begin: np.ndarray, message_bytes: int) -> Result:
    """Consensus ADMM's iterations, averaged by an allreduce or by neighbour mixing."""
    metrics = metrics or [None] * len(B2s)
    checks = _checks(run, B2s, pens, metrics, target)
    return solve_sync(run, layer, invs, B2s, [float(p) for p in pens], checks, begin,
                      message_bytes, metrics)


def simulate_one_shot(run: Any, layer: int, invs, B2s, pens, metrics, target,
                      begin: np.ndarray, message_bytes: int) -> Result:
    """The statistics averaged once (``invs``: each node's packed statistics), then each
    node's exact solve."""
    opts = run.opts
    Q, d = B2s[0].shape
    return solve_oneshot(layer, run.cfg.algorithm, run.graph, StatsLayout(d, Q), invs,
                         run.eps, begin, run.rounds, opts.speed, opts.network,
                         opts.allreduce, run.hops), True
