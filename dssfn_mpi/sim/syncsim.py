"""The sync engines in simulated time: every node's iteration in lockstep.

Per iteration, each node runs :func:`~dssfn_mpi.engines.updates.consensus_primal`;
the average of ``O_m + U_m`` is the network mean (``sync``, one allreduce) or
``mix_rounds`` rounds of :func:`~dssfn_mpi.engines.updates.mix_round` with
Metropolis weights (``sync-graph``); then
:func:`~dssfn_mpi.engines.updates.consensus_dual`. Times follow the rules of
:mod:`dssfn_mpi.timeline` (docs/REPLAY.md), one iteration at a time: an
iteration ends on every node at the slowest node's compute end plus the
allreduce (:func:`~dssfn_mpi.timeline.collective_end`); in sync-graph, round r
ends on a node one message after the latest round r-1 end among it and its
neighbours (:func:`~dssfn_mpi.timeline.exchange_end`).

Under ``--stop eps:E`` / ``local:TOL`` each node's flag of iteration k
(:meth:`~dssfn_mpi.stoprule.NodeCheck.sync_done`) rides in iteration
k+1's collective; when every flag is set the layer ends after that collective
with ``Zbar_k``. Sync-graph spreads the flags by a minimum over the same
mixing rounds; the simulation takes the decision as global (exact once the
rounds reach the graph's diameter, which ``mixing_rounds`` always does on the
graphs here).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..network import allreduce_seconds
from ..solver import LocalInverse
from ..stoprule import NodeCheck
from ..timeline import collective_end, exchange_end
from .asyncsim import NodeRun
from .nodes import mix

__all__ = ["solve_sync"]


def solve_sync(run: Any, layer: int, invs: list[LocalInverse], B2s: list[np.ndarray],
               rhos: list[float], checks: list[NodeCheck | None], begin: np.ndarray,
               message_bytes: float, metrics: list | None = None
               ) -> tuple[list[NodeRun], bool]:
    """Simulate one layer of a consensus algorithm (:mod:`dssfn_mpi.algorithms`; averaging
    by allreduce or by mixing), in each node's Gram metric when ``metrics`` is given.

    ``run`` is what the layer's solve needs of the run
    (:class:`~dssfn_mpi.sim.layerloop.SolveContext`).

    Returns
    -------
    (list of NodeRun, bool)
        Each node's run (its ``O`` is its ``Zbar``) and whether every node was done.
    """
    alg, graph, eps, rule, rounds = run.cfg.algorithm, run.graph, run.eps, run.rule, run.rounds
    iters, speed, network, hops = run.cfg.iters, run.opts.speed, run.opts.network, run.hops
    library = run.opts.allreduce
    M = len(invs)
    metrics = metrics or [None] * M
    U = [np.zeros_like(b) for b in B2s]
    Zbar = [np.zeros_like(b) for b in B2s]
    runs = [NodeRun(O=Zbar[m], end=float(begin[m])) for m in range(M)]
    flags = np.zeros(M, dtype=bool)
    reduce = allreduce_seconds(network, M, message_bytes, library) if alg.collective else 0.0
    message = network.message_seconds(message_bytes)
    t = np.asarray(begin, dtype=float).copy()
    all_done = False
    for k in range(iters):
        measured = np.empty(M)
        Os = []
        for m in range(M):
            c0 = time.thread_time()
            Os.append(alg.primal(invs[m], B2s[m], rhos[m], Zbar[m], U[m], metrics[m]))
            measured[m] = time.thread_time() - c0
        x = _shares(alg, Os, U, Zbar)
        c0 = time.thread_time()
        if alg.collective:
            mean = np.sum(np.stack(x), axis=0)
            mean /= M
            means = [mean] * M
        else:
            means = mix(graph, x, rounds)
        share = (time.thread_time() - c0) / M if not alg.collective else 0.0
        # The flags of iteration k-1 ride in this collective: all set, the layer ends
        # with Zbar_{k-1}, this iteration's dual step is not taken.
        all_done = not rule.fixed and k > 0 and bool(flags.all())
        if not all_done:
            new = []
            for m in range(M):
                c0 = time.thread_time()
                new.append(alg.dual(means[m], eps, Os[m], U[m], Zbar[m], metrics[m]))
                measured[m] += time.thread_time() - c0
                if checks[m] is not None:
                    flags[m] = checks[m].sync_done(Os[m], new[m])
            Zbar = new
        cost = speed.activations(layer, k, measured + share)
        ready = t + cost
        end = (collective_end(ready, reduce) if alg.collective
               else exchange_end(ready, hops, rounds, message))
        for m in range(M):
            runs[m].starts.append(float(t[m]))
            runs[m].ends.append(float(end[m]))
            runs[m].compute += float(cost[m])
            runs[m].wait += float(end[m] - ready[m])
            runs[m].activations += 1
        t = end
        if all_done:
            break
    for m in range(M):
        runs[m].O = Zbar[m]
        runs[m].end = float(t[m])
    return runs, all_done


def _shares(alg, Os: list[np.ndarray], U: list[np.ndarray],
            Zbar: list[np.ndarray]) -> list[np.ndarray]:
    """Each node's vector to average: its algorithm's ``share`` (``O_m + U_m``)."""
    out = [np.empty_like(O) for O in Os]
    for O, u, z, x in zip(Os, U, Zbar, out):
        alg.share(O, u, z, x)
    return out
