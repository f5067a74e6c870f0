"""When each activation and iteration happens: the timing rules of replay and simulate.

The cost model of a decentralized layer, written once. ``dssfn-mpi replay``
(:mod:`dssfn_mpi.analysis.replay`) applies it to a traced run's compute, all of a
layer at once; ``dssfn-mpi simulate`` (:mod:`dssfn_mpi.sim`) to its speed
model's, step by step as its nodes run. docs/REPLAY.md states the rules and
what they assume; every time here is in seconds.

- **Layer start** (:meth:`TimingModel.layer_begin`): the node's previous
  layer ended; its features and penalty compute; with the auto penalty, the
  engine's exchange of three numbers (async: one neighbour exchange; sync: an
  allreduce; sync-graph: ``mix_rounds`` neighbour rounds), or on a layer solved
  in the Gram metric the same exchange of the packed Gram matrix; async only, the
  parity wait (every neighbour ended layer l-2, plus alpha); then the
  factorisation.
- **Async** (bounded delay): activation k starts when the node's activation
  k-1 ended and, with ``max_lead = s``, every neighbour's activation k-s-1
  ended (its version k-s arrived): :func:`bounded_delay` for a whole layer of
  known costs, :func:`activation_start` one activation at a time.
- **Sync**: a collective ends on every node at the latest ready time plus its
  cost (:func:`collective_end`, :func:`sync_times`).
- **Neighbour exchanges** (sync-graph, the auto penalty): round r ends on a
  node at the latest round r-1 end among it and its neighbours plus one
  message; over r rounds, the latest ready time within r hops plus r messages
  (:func:`exchange_end`, :func:`graph_times`, :func:`hop_distances`).
- **One-shot**: the packed statistics' allreduce (``oneshot``) or
  ``mix_rounds`` neighbour rounds (``oneshot-graph``), then each node's exact
  solve (:func:`oneshot_end`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..algorithms import lookup
from .network import Network, allreduce_seconds

__all__ = [
    "PENALTY_BYTES",
    "TimingModel",
    "activation_start",
    "bounded_delay",
    "collective_end",
    "exchange_end",
    "graph_times",
    "hop_distances",
    "lead_activation",
    "neighbor_table",
    "neighbour_max",
    "oneshot_end",
    "sync_times",
]

#: The auto penalty exchanges three float64 numbers per node ([lam_m, s_m, g_m]).
PENALTY_BYTES = 24


# --------------------------------------------------------------------------- the graph


def neighbor_table(neighbors: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """Each node's neighbours as an (M, D) integer table padded with -1.

    Parameters
    ----------
    neighbors
        ``graph.neighbors(m)`` of each node, or such a table already.

    Returns
    -------
    numpy.ndarray
        Shape (M, max degree), dtype int64.
    """
    if isinstance(neighbors, np.ndarray):
        return neighbors.astype(np.int64, copy=False)
    width = max((len(nb) for nb in neighbors), default=0)
    table = np.full((len(neighbors), width), -1, dtype=np.int64)
    for m, nb in enumerate(neighbors):
        table[m, : len(nb)] = nb
    return table


def hop_distances(neighbors: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """Graph distance between every pair of nodes (breadth-first; inf if unreachable).

    Parameters
    ----------
    neighbors
        As for :func:`neighbor_table`; edges count both ways.

    Returns
    -------
    numpy.ndarray
        Shape (M, M), float64: 0 on the diagonal, whole numbers or inf elsewhere.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    table = neighbor_table(neighbors)
    m = table.shape[0]
    rows, cols = np.nonzero(table >= 0)
    adj = csr_matrix((np.ones(rows.size), (rows, table[rows, cols])), shape=(m, m))
    return shortest_path(adj, method="D", directed=False, unweighted=True)


def neighbour_max(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Per node, the largest of its neighbours' ``values`` (-inf without neighbours).

    Parameters
    ----------
    values
        One number per node, shape (M,).
    table
        :func:`neighbor_table`.
    """
    mask = table >= 0
    picked = np.where(mask, values[np.where(mask, table, 0)], -np.inf)
    return picked.max(axis=1, initial=-np.inf)


# --------------------------------------------------------------------------- one step


def exchange_end(ready: np.ndarray, hops: np.ndarray, rounds: int, seconds: float) -> np.ndarray:
    """End of ``rounds`` neighbour exchanges that each cost ``seconds``.

    Round r ends at the latest round r-1 end among a node and its neighbours
    plus ``seconds``; unrolled, that is the latest start within ``rounds``
    hops plus ``rounds * seconds``.

    Parameters
    ----------
    ready
        When each node is ready to send, shape (M,).
    hops
        :func:`hop_distances`.
    rounds
        Exchanges in a row.
    seconds
        One message's time.
    """
    ball = hops <= rounds
    return np.where(ball, ready[None, :], -np.inf).max(axis=1) + rounds * seconds


def collective_end(ready: np.ndarray, seconds: float) -> np.ndarray:
    """A collective over all nodes ends on every node at the latest ready time plus ``seconds``."""
    return np.full(ready.size, ready.max() + seconds)


def oneshot_end(mode: str, ready: np.ndarray, hops: np.ndarray, rounds: int, nbytes: float,
                net: Network, library: str) -> np.ndarray:
    """When each node holds the averaged statistics of a one-shot layer.

    ``oneshot``: one allreduce of ``nbytes`` once the last node is ready
    (:func:`collective_end`, :func:`~dssfn_mpi.analysis.network.allreduce_seconds`);
    ``oneshot-graph``: ``rounds`` neighbour exchanges of them (:func:`exchange_end`).
    """
    if lookup(mode).collective:
        return collective_end(ready, allreduce_seconds(net, ready.size, nbytes, library))
    return exchange_end(ready, hops, rounds, net.message_seconds(nbytes))


def lead_activation(k: int, max_lead: int | None) -> int:
    """The neighbour activation whose end lets activation ``k`` start (-1: none).

    Version k-s of a neighbour's ``Z`` is written by its activation k-s-1.
    """
    return -1 if max_lead is None else k - max_lead - 1


def activation_start(prev_end: float, k: int, max_lead: int | None,
                     neighbour_ends: Sequence[Sequence[float]]) -> float | None:
    """When activation ``k`` of a node starts, from what has ended so far.

    Parameters
    ----------
    prev_end
        When the node's activation k-1 ended (its layer start for k = 0).
    k, max_lead
        The activation and the bounded delay s (None: unbounded).
    neighbour_ends
        Each neighbour's activation end times so far.

    Returns
    -------
    float or None
        The start, or None while a neighbour has not yet ended activation k-s-1.
    """
    j = lead_activation(k, max_lead)
    if j < 0:
        return prev_end
    start = prev_end
    for ends in neighbour_ends:
        if len(ends) <= j:
            return None
        if ends[j] > start:
            start = float(ends[j])
    return start


# --------------------------------------------------------------------------- a whole layer


def bounded_delay(begin: np.ndarray, cost: np.ndarray, table: np.ndarray,
                  max_lead: int | None, counts: np.ndarray | None = None,
                  arrive: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (M, K) of every activation of a layer under the bounded-delay rule.

    Parameters
    ----------
    begin
        When each node may start its first activation, shape (M,).
    cost
        Duration of every activation, shape (M, K).
    table
        :func:`neighbor_table`.
    max_lead
        The bounded delay s (None: unbounded, each node on its own).
    counts
        Activations each node ran (a node that ended the layer early holds
        nobody back); None: all K.
    arrive
        Delay from an activation's end until its ``Z`` has arrived (0 when
        ``cost`` includes the puts).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``start`` and ``end``, each (M, K).
    """
    if max_lead is None:
        end = begin[:, None] + np.cumsum(cost, axis=1)
        return end - cost, end
    start, end = np.empty_like(cost), np.empty_like(cost)
    prev = begin
    for k in range(cost.shape[1]):
        j = lead_activation(k, max_lead)
        held = None
        if j >= 0:
            held = end[:, j] if counts is None else np.where(j < counts, end[:, j], -np.inf)
        s = prev if held is None else np.maximum(prev, neighbour_max(held, table) + arrive)
        start[:, k] = s
        end[:, k] = prev = s + cost[:, k]
    return start, end


def sync_times(begin: np.ndarray, cost: np.ndarray,
               seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (M, K) of lockstep iterations that each end with a collective.

    Iteration k ends on every node at the slowest node's compute end plus the
    collective's ``seconds`` (:func:`collective_end`), summed over the iterations.
    """
    m, k = cost.shape
    step = cost.max(axis=0) + seconds
    step[0] = (begin + cost[:, 0]).max() + seconds
    ends = np.cumsum(step)
    start = np.empty_like(cost)
    start[:, 0] = begin
    start[:, 1:] = ends[:-1]
    return start, np.broadcast_to(ends, (m, k)).copy()


def graph_times(begin: np.ndarray, cost: np.ndarray, hops: np.ndarray, rounds: int,
                seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (M, K) of iterations that each end with ``rounds`` neighbour rounds."""
    start, end = np.empty_like(cost), np.empty_like(cost)
    prev = begin
    for k in range(cost.shape[1]):
        start[:, k] = prev
        end[:, k] = prev = exchange_end(prev + cost[:, k], hops, rounds, seconds)
    return start, end


# --------------------------------------------------------------------------- the run's model


@dataclass
class TimingModel:
    """What places a run's layers in time: its mode, graph and network.

    Attributes
    ----------
    mode : str
        A decentralized ``--mode`` (``async``, ``sync``, ``sync-graph``, ``lockstep``, ...).
    neighbors : numpy.ndarray
        :func:`neighbor_table`.
    hops : numpy.ndarray
        :func:`hop_distances`.
    network : Network
        Message and collective costs.
    mix_rounds : int
        Sync-graph's rounds per iteration, oneshot-graph's per layer (0 otherwise).
    auto_penalty : bool
        Whether each layer starts with the auto penalty's exchange.
    allreduce : str
        Whose allreduce algorithm a sync collective costs (``mpich``, ``openmpi``).
    """

    mode: str
    neighbors: np.ndarray
    hops: np.ndarray
    network: Network
    mix_rounds: int = 0
    auto_penalty: bool = True
    allreduce: str = "mpich"

    @property
    def algorithm(self):
        """The algorithm of :attr:`mode` (:func:`dssfn_mpi.algorithms.lookup`)."""
        return lookup(self.mode)

    @property
    def nodes(self) -> int:
        """M."""
        return int(self.neighbors.shape[0])

    def allreduce_seconds(self, nbytes: float) -> float:
        """One allreduce of ``nbytes`` per node over the run's nodes."""
        return allreduce_seconds(self.network, self.nodes, nbytes, self.allreduce)

    def layer_begin(self, t0: np.ndarray, phases: np.ndarray,
                    two_before: np.ndarray | None, metric_bytes: int = 0) -> np.ndarray:
        """When each node's first activation (iteration) of a layer may start.

        Parameters
        ----------
        t0
            When each node's previous layer ended, shape (M,).
        phases
            Seconds of the layer-start phases per node: features, penalty,
            factorisation, shape (M, 3).
        two_before
            When each node ended layer l-2 (None for the first two layers).
        metric_bytes
            On a layer solved in the Gram metric, the bytes each node sends a neighbour
            in the exchanges that form it (its penalty then needs none; the algorithm's
            :attr:`~dssfn_mpi.algorithms.Algorithm.metric_exchanges` of them, in a row,
            of equal messages); 0 otherwise.

        Returns
        -------
        numpy.ndarray
            Shape (M,).
        """
        ready = t0 + phases[:, 0] + phases[:, 1]
        alg = self.algorithm
        exchanges, exchanged = 1, PENALTY_BYTES if self.auto_penalty else 0
        if metric_bytes > 0:
            exchanges = alg.metric_exchanges
            exchanged = metric_bytes / exchanges
        if exchanged:
            if alg.collective:
                ready = collective_end(ready, exchanges * self.allreduce_seconds(exchanged))
            else:
                rounds = exchanges * (1 if alg.per_neighbour else self.mix_rounds)
                ready = exchange_end(ready, self.hops, rounds,
                                     self.network.message_seconds(exchanged))
        if alg.one_sided and two_before is not None:  # parity slots
            ready = np.maximum(ready, neighbour_max(two_before, self.neighbors)
                               + self.network.alpha)
        return ready + phases[:, 2]
