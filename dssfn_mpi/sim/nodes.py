"""Every simulated node's data, layer statistics and penalty, as each live rank computes them.

The live layer loop (:mod:`dssfn_mpi.run.train`) runs on every rank: features
from the rank's own previous solution, ``G_m = Y Y^T``, ``B_m = T Y^T``, the
``auto`` penalty from the rank's ``[lam_m, s_m, g_m]`` combined over the ranks its
engine talks to. Here the same functions (:mod:`dssfn_mpi.run.layerstep`) run for all
M nodes in one process,
and each node's algorithm combines what its driver gathers (:func:`exchange`):
the one-sided drivers each neighbour's values; the allreduce the network mean;
mixing ``mix_rounds`` rounds of Metropolis weights (:mod:`.mixing`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..algorithms import needs_gram
from ..config import TrainConfig
from ..drivers import Penalty
from ..run.layerstep import layer_inputs
from ..ssfn.gramstats import StatsLayout
from ..ssfn.model import one_hot
from ..ssfn.solver import penalty_stats
from .mixing import mixer

__all__ = ["Layer", "Shards", "exchange", "layer_metrics", "layer_problems", "load_shards",
           "penalties"]


@dataclass
class Shards:
    """The run's data as the live ranks hold it: one training shard per node."""

    X: list[np.ndarray]  # X[m]: (P, J_m)
    y: list[np.ndarray]
    T: list[np.ndarray]  # one-hot targets of each shard
    Xt: np.ndarray  # the test set
    yt: np.ndarray
    n_classes: int
    name: str

    @property
    def sizes(self) -> list[int]:
        return [x.shape[1] for x in self.X]


def load_shards(cfg: TrainConfig, nodes: int) -> Shards:
    """Read the dataset and split it as :func:`dssfn_mpi.run.runstate.prepare_run` does."""
    from ..datasets import load_dataset
    from ..datasets.partition import partition

    ds = load_dataset(cfg.dataset, cfg.data_dir, seed=cfg.seed, **cfg.dataset_options)
    parts = partition(ds.y_train, nodes, cfg.partition, seed=cfg.seed)
    X = [np.ascontiguousarray(ds.X_train[:, p]) for p in parts]
    y = [ds.y_train[p] for p in parts]
    return Shards(X=X, y=y, T=[one_hot(v, ds.n_classes) for v in y], Xt=ds.X_test,
                  yt=ds.y_test, n_classes=ds.n_classes, name=ds.name)


@dataclass
class Layer:
    """One node's problem of one layer, and the CPU seconds its set-up took."""

    Y: np.ndarray
    G: np.ndarray | None  # kept only where the local inverse needs it (dense path)
    B: np.ndarray
    stats: np.ndarray  # [lam_m, s_m, g_m] for the auto penalty (zeros with a fixed penalty)
    features_cpu: float
    penalty_cpu: float
    gram_trace: float
    pack_cpu: float = 0.0  # packing its statistics (the one-shot modes' factor phase)
    G_sent: np.ndarray | None = None  # in place of G: its upper triangle, as sent (packed)

    def gram(self) -> np.ndarray | None:
        """``G_m`` as the node keeps it: :attr:`G`, or unpacked from :attr:`G_sent`;
        None where neither is kept."""
        if self.G_sent is None:
            return self.G
        return StatsLayout(self.Y.shape[0], 0).unpack(self.G_sent)[0]


def layer_problems(cfg: TrainConfig, shards: Shards, layer: int, hidden: int, eps: float,
                   Ys: list[np.ndarray], Os: list[np.ndarray] | None,
                   G_sum: np.ndarray | None, packed: np.ndarray | None = None,
                   grams: np.ndarray | None = None) -> list[Layer]:
    """Each node's features and statistics of ``layer`` (its own previous ``O``).

    ``Ys`` are the features of ``layer - 1`` (the shards at layer 0), ``Os``
    the nodes' solutions of ``layer - 1``. ``G_sum``, if given, accumulates
    ``sum_m G_m`` (for the exact solution) so that no node keeps a ``d x d``
    matrix it does not need. ``packed``, if given (M rows), receives each node's
    statistics packed by :class:`~dssfn_mpi.ssfn.gramstats.StatsLayout` (the one-shot modes'
    message) as they are formed, and no ``G`` is kept. ``grams``, if given (M rows),
    receives each node's ``G`` upper triangle (a mixed metric's exchange), and ``G`` is kept
    only where the node's local inverse needs it.
    """
    metric, alg = cfg.metric_at(layer), cfg.algorithm
    auto = (cfg.penalty_at(layer) is None and not alg.direct
            and not metric)  # the metric form's penalty needs no statistics
    out = []
    for m, Yprev in enumerate(Ys):
        c0 = time.thread_time()
        O_prev = Os[m] if layer > 0 else None
        Y, G, B = layer_inputs(O_prev, cfg.seed, layer, hidden, Yprev, shards.T[m])
        c1 = time.thread_time()
        stats = np.zeros(3)
        if auto:
            stats = penalty_stats(Y, shards.T[m], G, eps)
        c2 = time.thread_time()
        if G_sum is not None:
            G_sum += G
        if packed is not None:
            StatsLayout(G.shape[0], B.shape[0]).pack(G, B, out=packed[m])
        if grams is not None:
            StatsLayout(G.shape[0], 0).pack(G, B[:0], out=grams[m])
        c3 = time.thread_time()
        # The dense local inverses use G, and the per-neighbour metrics each node's G (a
        # metric from the network mean is formed from G_sum, a mixed one from grams).
        keep = packed is None and (needs_gram(Y, int(metric))
                                   or (metric and alg.per_neighbour))
        out.append(Layer(Y=Y, G=G if keep else None, B=B, stats=stats, features_cpu=c1 - c0,
                         penalty_cpu=c2 - c1, gram_trace=float(np.trace(G)),
                         pack_cpu=c3 - c2))
    return out


def exchange(alg, graph, values: list[np.ndarray], rounds: int) -> list:
    """What each node's driver gathers of ``values`` (one per node): each neighbour's
    (per-neighbour drivers, in the order of ``graph.neighbors(m)``), the network mean
    (allreduce) or ``rounds`` rounds of mixing."""
    M = graph.n_nodes
    if alg.per_neighbour:
        return [[values[n] for n in graph.neighbors(m)] for m in range(M)]
    if alg.mixes:
        return mix(graph, values, rounds)
    mean = np.sum(np.stack(values), axis=0) / M
    return [mean] * M


def penalties(cfg: TrainConfig, graph, layer: int, stats: list[np.ndarray],
              rounds: int = 0, ratio: float = 0.0) -> list[float | np.ndarray]:
    """Each node's penalty of ``layer``: fixed, or ``auto`` by its algorithm's rule.

    Returns per node what the algorithm's penalty is: one gamma per neighbour (in the
    order of ``graph.neighbors(m)``) for edge penalties, else one rho; NaN when the
    layer is solved directly. ``ratio`` is the layer's width over the mean samples per
    node (:func:`~dssfn_mpi.ssfn.solver.width_ratio`), which the metric form's rule reads.
    """
    M, alg = graph.n_nodes, cfg.algorithm
    fixed = cfg.penalty_at(layer)
    source = alg.driver.penalty_source(fixed, cfg.metric_at(layer))
    if source is Penalty.NONE:  # solved exactly: no penalty
        return [float("nan")] * M
    if source is Penalty.FIXED:
        return [alg.fixed_penalty(fixed, graph.degree(m)) for m in range(M)]
    if source is Penalty.METRIC:  # from the graph alone
        return [alg.metric_penalty(graph, m, ratio) for m in range(M)]
    gathered = exchange(alg, graph, [np.array(s, dtype=float) for s in stats], rounds)
    return [alg.auto_penalty(stats[m], gathered[m], graph, m) for m in range(M)]


def layer_metrics(cfg: TrainConfig, graph, probs: list[Layer], rounds: int = 0,
                  G_sum: np.ndarray | None = None, grams: np.ndarray | None = None) -> list:
    """Each node's Gram metric of a layer solved in it, as its algorithm forms it from
    what its driver gathers (:func:`exchange`): one per neighbour (a list) for the
    per-neighbour drivers, else one.

    Each node's CPU seconds for it are added to its penalty phase (the live engines
    form the metric where the penalty is). For the layers where
    ``cfg.metric_at(layer)``; the per-neighbour drivers' need the nodes' ``G``. Under an
    allreduce ``G_sum`` (``sum_m G_m``) gives the network mean and every node the same
    metric: one object, formed once and charged to every node. Under mixing ``grams``
    (each node's packed ``G``) is mixed :data:`~.mixing.BLOCK` nodes at a time and each
    node keeps its metric's eigendecomposition alone
    (:meth:`~dssfn_mpi.ssfn.metric.Metric.compact`).
    """
    alg = cfg.algorithm
    if alg.mixes:
        return _mixed_metrics(alg, mixer(graph, rounds), probs, grams)
    if alg.collective:
        layout = StatsLayout(G_sum.shape[0], 0)
        c0 = time.thread_time()
        shared = alg.metric(None, layout.unpack(layout.pack(G_sum, G_sum[:0]))[0] / len(probs))
        cpu = time.thread_time() - c0
        for p in probs:
            p.penalty_cpu += cpu
        return [shared] * len(probs)
    # As the engines send them: the packed upper triangle, unpacked (both ends of an async
    # edge then build their metric from the same numbers).
    layout = StatsLayout(probs[0].G.shape[0], 0)
    if alg.metric_per_edge:
        return _edge_metrics(alg, graph, probs, layout)
    for p in probs:
        p.G = layout.unpack(layout.pack(p.G, p.G[:0]))[0]
    Gs = [p.G for p in probs]
    gathered = exchange(alg, graph, Gs, rounds)
    out = []
    for m, p in enumerate(probs):
        c0 = time.thread_time()
        out.append(alg.metric(Gs[m], gathered[m]))
        p.penalty_cpu += time.thread_time() - c0
    if not alg.relays_metric:
        return out
    # A second exchange: each node's matrix (its neighbourhood's metric) to its neighbours.
    Ss = [layout.unpack(layout.pack(S, S[:0]))[0] for S in out]
    relayed = exchange(alg, graph, Ss, rounds)
    for m, p in enumerate(probs):
        c0 = time.thread_time()
        out[m] = alg.relayed_metric(Ss[m], relayed[m])
        p.penalty_cpu += time.thread_time() - c0
    return out


def _edge_metrics(alg, graph, probs: list[Layer], layout: StatsLayout) -> list[list]:
    """Each node's metrics, one per neighbour, each edge's formed once and held by both ends
    as its eigendecomposition alone (:meth:`~dssfn_mpi.ssfn.metric.Metric.compact`); each end is
    charged the CPU of forming it.

    Each node keeps what it sends in place of its ``G`` (:attr:`Layer.G_sent`, half the
    memory), and each edge's ends are unpacked from it as they are needed."""
    for p in probs:
        p.G_sent, p.G = layout.pack(p.G, p.G[:0]), None
    built: dict[tuple[int, int], tuple] = {}
    out = []
    for m, p in enumerate(probs):
        mets, G = [], None
        for n in graph.neighbors(m):
            key = (min(m, n), max(m, n))
            if key in built:
                metric, cpu = built.pop(key)
            else:
                G = layout.unpack(p.G_sent)[0] if G is None else G
                Gn = layout.unpack(probs[n].G_sent)[0]
                c0 = time.thread_time()
                metric = alg.metric(G, [Gn])[0].compact()
                built[key] = metric, cpu = metric, time.thread_time() - c0
            mets.append(metric)
            p.penalty_cpu += cpu
        out.append(mets)
    return out


def _mixed_metrics(alg, mix, probs: list[Layer], grams: np.ndarray) -> list:
    """Each node's metric from its mixed ``G`` (:func:`layer_metrics` under mixing); each
    node is charged the rounds' arithmetic as a live node runs it."""
    layout = StatsLayout(probs[0].Y.shape[0], 0)
    rounds = mix.compute_seconds(grams.shape[1:], time.thread_time)
    for p, cpu in zip(probs, rounds):
        p.penalty_cpu += cpu
    out = []
    for lo, means in mix.blocks(grams):
        for p, x in zip(probs[lo:], means):
            c0 = time.thread_time()
            out.append(alg.metric(None, layout.unpack(x)[0]).compact())
            p.penalty_cpu += time.thread_time() - c0
    return out


def mix(graph, values: list[np.ndarray], rounds: int) -> list[np.ndarray]:
    """``rounds`` synchronous rounds of neighbour mixing with Metropolis weights.

    What :meth:`dssfn_mpi.engines.sync_graph.SyncGraphEngine.average` does on
    every rank, with every node's round computed from the previous round's values: all
    nodes at once (:mod:`.mixing`).
    """
    return list(mixer(graph, rounds).apply(np.stack(values)))
