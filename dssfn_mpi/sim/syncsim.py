"""The sync engines in simulated time: every node's iteration in lockstep.

Per iteration, each node runs :func:`~dssfn_mpi.algorithms.updates.consensus_primal`;
the average of ``O_m + U_m`` is the network mean (``sync``, one allreduce) or
``mix_rounds`` rounds of :func:`~dssfn_mpi.algorithms.updates.mix_round` with
Metropolis weights (``sync-graph``); then
:func:`~dssfn_mpi.algorithms.updates.consensus_dual`. Times follow the rules of
:mod:`dssfn_mpi.analysis.timeline` (docs/REPLAY.md), one iteration at a time: an
iteration ends on every node at the slowest node's compute end plus the
allreduce (:func:`~dssfn_mpi.analysis.timeline.collective_end`); in sync-graph, round r
ends on a node one message after the latest round r-1 end among it and its
neighbours (:func:`~dssfn_mpi.analysis.timeline.exchange_end`).

Under ``--stop eps:E`` / ``local:TOL`` each node's flag of iteration k
(:meth:`~dssfn_mpi.algorithms.stoprule.NodeCheck.sync_done`) rides in iteration
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

from ..algorithms.stoprule import NodeCheck
from ..analysis.network import allreduce_seconds
from ..analysis.timeline import collective_end, exchange_end
from ..ssfn.solver import LocalInverse, StackedInverse, project_frobenius
from .asyncsim import NodeRun, by_node
from .heartbeat import Heartbeat
from .mixing import mixer
from .nodes import mix

__all__ = ["STACKED", "solve_sync"]

#: Run the scalar-penalty layers on stacked arrays (:func:`_solve_stacked`); False: node by
#: node (the reference the tests compare the stacked path with).
STACKED = True


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
    M = len(invs)
    shared = _shared_metric(metrics)
    if STACKED and shared is not False and all(StackedInverse.stackable(i) for i in invs):
        return _solve_stacked(run, layer, invs, B2s, rhos, checks, begin, message_bytes,
                              shared)
    alg, graph, eps, rule, rounds = run.cfg.algorithm, run.graph, run.eps, run.rule, run.rounds
    metrics = metrics or [None] * M
    clock = run.opts.speed.cpu_clock()
    U = [np.zeros_like(b) for b in B2s]
    Zbar = [np.zeros_like(b) for b in B2s]
    flags = np.zeros(M, dtype=bool)
    times = _Times(run, layer, begin, message_bytes)
    share = (0.0 if alg.collective
             else mixer(graph, rounds).compute_seconds(B2s[0].shape, clock))
    all_done = False
    for k in range(run.cfg.iters):
        measured = np.empty(M)
        Os = []
        for m in range(M):
            c0 = clock()
            Os.append(alg.primal(invs[m], B2s[m], rhos[m], Zbar[m], U[m], metrics[m]))
            measured[m] = clock() - c0
        x = _shares(alg, Os, U, Zbar)
        if alg.collective:
            mean = np.sum(np.stack(x), axis=0)
            mean /= M
            means = [mean] * M
        else:
            means = mix(graph, x, rounds)
        # The flags of iteration k-1 ride in this collective: all set, the layer ends
        # with Zbar_{k-1}, this iteration's dual step is not taken.
        all_done = not rule.fixed and k > 0 and bool(flags.all())
        if not all_done:
            new = []
            for m in range(M):
                c0 = clock()
                new.append(alg.dual(means[m], eps, Os[m], U[m], Zbar[m], metrics[m]))
                measured[m] += clock() - c0
                if checks[m] is not None:
                    flags[m] = checks[m].sync_done(Os[m], new[m])
            Zbar = new
        times.advance(k, measured + share, None if rule.fixed else int(flags.sum()))
        if all_done:
            break
    return times.finish(Zbar), all_done


def _shared_metric(metrics: list | None) -> Any:
    """The one metric every node holds (None: the scalar penalty), or False when the nodes'
    metrics differ (sync-graph's mixed means: node by node)."""
    first = None if not metrics else metrics[0]
    return first if all(m is first for m in metrics or []) else False


def _shares(alg, Os: list[np.ndarray], U: list[np.ndarray],
            Zbar: list[np.ndarray]) -> list[np.ndarray]:
    """Each node's vector to average: its algorithm's ``share`` (``O_m + U_m``)."""
    out = [np.empty_like(O) for O in Os]
    for O, u, z, x in zip(Os, U, Zbar, out):
        alg.share(O, u, z, x)
    return out


class _Times:
    """The simulated times of a consensus layer, iteration by iteration, and the nodes' runs."""

    def __init__(self, run: Any, layer: int, begin: np.ndarray, message_bytes: float) -> None:
        alg, network, M = run.cfg.algorithm, run.opts.network, len(begin)
        self.layer, self.alg, self.speed, self.hops = layer, alg, run.opts.speed, run.hops
        self.rounds = run.rounds
        self.reduce = (allreduce_seconds(network, M, message_bytes, run.opts.allreduce)
                       if alg.collective else 0.0)
        self.message = network.message_seconds(message_bytes)
        self.t = np.asarray(begin, dtype=float).copy()
        self.beat = Heartbeat(f"layer {layer} {alg.name}", run.opts.heartbeat)
        self.runs = [NodeRun(O=np.empty(0), end=float(begin[m])) for m in range(M)]
        self.starts: list[np.ndarray] = []  # every node's, per iteration
        self.ends: list[np.ndarray] = []

    def advance(self, k: int, measured: np.ndarray, done: int | None = None) -> np.ndarray:
        """Iteration ``k`` with each node's measured compute: its start and end on every
        node; returns the ends. ``done``: the nodes whose stop test passed (for the
        heartbeat)."""
        cost = self.speed.activations(self.layer, k, measured)
        ready = self.t + cost
        end = (collective_end(ready, self.reduce) if self.alg.collective
               else exchange_end(ready, self.hops, self.rounds, self.message))
        self.starts.append(self.t)
        self.ends.append(end)
        for m, r in enumerate(self.runs):
            r.compute += float(cost[m])
            r.wait += float(end[m] - ready[m])
            r.activations += 1
        self.t = end
        self.beat(float(end.max()), (k + 1) * end.size, done, end.size)
        return end

    def finish(self, Zbar: Any) -> list[NodeRun]:
        """The runs, each node's ``O`` its ``Zbar``."""
        starts, ends = (by_node(x, len(self.runs)) for x in (self.starts, self.ends))
        for m, r in enumerate(self.runs):
            r.O = np.array(Zbar[m])
            r.end = float(self.t[m])
            r.starts, r.ends = starts[m], ends[m]
        return self.runs


class _Slices:
    """The identity metric on stacked values (M, Q, d): the scalar forms' arithmetic node by
    node, for the algorithm's ``primal`` and ``dual`` run on the stacks."""

    @staticmethod
    def times(X: np.ndarray) -> np.ndarray:
        return X

    @staticmethod
    def project(W: np.ndarray, eps: float) -> np.ndarray:
        """:func:`~dssfn_mpi.ssfn.solver.project_frobenius` of each node's slice (of one shared
        matrix: the network mean)."""
        if W.ndim == 2:
            return project_frobenius(W, eps)
        out = W
        for m, w in enumerate(W):
            p = project_frobenius(w, eps)
            if p is not w:
                out = W.copy() if out is W else out
                out[m] = p
        return out


class _Projected:
    """A metric whose projection of one matrix (the network mean) is computed once."""

    def __init__(self, metric: Any, W: np.ndarray, eps: float) -> None:
        self._metric, self._W, self._P = metric, W, metric.project(W, eps)

    def project(self, W: np.ndarray, eps: float) -> np.ndarray:
        return self._P if W is self._W else self._metric.project(W, eps)


#: Values per node chunk of the stacked path (its arrays stay in cache: 64 k doubles).
CHUNK_VALUES = 1 << 16


def _solve_stacked(run: Any, layer: int, invs: list[LocalInverse], B2s: list[np.ndarray],
                   rhos: list[float], checks: list[NodeCheck | None], begin: np.ndarray,
                   message_bytes: float, metric: Any = None) -> tuple[list[NodeRun], bool]:
    """:func:`solve_sync` on stacked arrays: the algorithm's ``primal``, ``share`` and
    ``dual`` on chunks of nodes at once (each node's arithmetic; its measured compute the
    batch's over M), in the Gram ``metric`` all nodes share when given."""
    alg, eps, rule, M = run.cfg.algorithm, run.eps, run.rule, len(invs)
    metric = metric or _Slices
    B2 = np.stack(B2s)
    size = max(1, CHUNK_VALUES // B2[0].size)
    chunks = [slice(lo, min(lo + size, M)) for lo in range(0, M, size)]
    parts = [(c, StackedInverse(invs[c]), np.asarray(rhos[c], dtype=float).reshape(-1, 1, 1))
             for c in chunks]
    U, Zbar, O, x = (np.zeros_like(B2) for _ in range(4))
    flags = np.zeros(M, dtype=bool)
    times = _Times(run, layer, begin, message_bytes)
    mix = None if alg.collective else mixer(run.graph, run.rounds)
    mixing = (0.0 if mix is None
              else mix.compute_seconds(B2.shape[1:], run.opts.speed.cpu_clock()))
    all_done = False
    for k in range(run.cfg.iters):
        c0 = time.thread_time()
        for c, inv, rho in parts:
            Zc = Zbar if Zbar.ndim == 2 else Zbar[c]
            O[c] = alg.primal(inv, B2[c], rho, Zc, U[c], metric)
            alg.share(O[c], U[c], Zc, x[c])
        c1 = time.thread_time()
        if alg.collective:
            mean = np.sum(x, axis=0)
            mean /= M
        else:
            mean = mix.apply(x)
        c2 = time.thread_time()
        all_done = not rule.fixed and k > 0 and bool(flags.all())
        if not all_done:
            Zbar = _dual(alg, mean, eps, O, U, Zbar, chunks, metric)
            for m, check in enumerate(checks):
                if check is not None:
                    flags[m] = check.sync_done(O[m], Zbar if Zbar.ndim == 2 else Zbar[m])
        cpu = (time.thread_time() - c2 + c1 - c0) / M
        times.advance(k, cpu + mixing, None if rule.fixed else int(flags.sum()))
        if all_done:
            break
    return times.finish(np.broadcast_to(Zbar, B2.shape)), all_done


def _dual(alg, mean: np.ndarray, eps: float, O: np.ndarray, U: np.ndarray, Zbar: np.ndarray,
          chunks: list[slice], metric: Any) -> np.ndarray:
    """The algorithm's ``dual`` chunk by chunk: the new ``Zbar``, one (the network mean's
    projection) or one per node."""
    out = None if mean.ndim == 2 else np.empty_like(mean)
    if out is None:  # the network mean's projection, once for every chunk
        metric = _Projected(metric, mean, eps)
    for c in chunks:
        new = alg.dual(mean if out is None else mean[c], eps, O[c], U[c],
                       Zbar if Zbar.ndim == 2 else Zbar[c], metric)
        if out is None:
            shared = new
        else:
            out[c] = new
    return shared if out is None else out
