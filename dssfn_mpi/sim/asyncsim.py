"""The async engine in simulated time: a priority queue of activations.

Per node m and activation k (the rules of :mod:`dssfn_mpi.engines.async_arock`
and of :mod:`dssfn_mpi.analysis.timeline`, docs/REPLAY.md): it starts when the node's
activation k-1 ended and, under ``--max-lead s``, version k-s of every neighbour has arrived
(that neighbour's activation k-s-1 ended); it reads the latest ``Z_{n,m}`` that
has arrived from each neighbour; it runs :class:`~dssfn_mpi.algorithms.updates.EdgeStep`
(the engine's own step, compiled when numba is installed, as live); it lasts
its compute (:mod:`.speed`) plus its puts, one message of the network model,
and its new ``Z`` arrives at its neighbours when it ends.

Activations are executed in order of their start times; each one queues the arrival of
its ``Z`` at its end, which comes before any activation that starts at that time or later.
Each node runs one activation at a time, so when a node reads at time t each neighbour
has at most one activation that started before t and has not ended: what the neighbours
read is a copy of each node's ``Z`` made when it arrives, and the one in flight is the
node's own ``Z``, which its next activation changes only after the arrival.

Under ``--stop eps:E`` / ``local:TOL`` each activation ends with the node's
:class:`~dssfn_mpi.algorithms.stoprule.NodeCheck`; the first moment at which every
node's latest check says done, the layer ends for all: the signal arrives one
small-message latency (alpha) later, and no activation starts after that.
``--iters`` K caps the activations (reason ``cap``).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from ..algorithms.stoprule import NodeCheck, StopRule
from ..algorithms.updates import EdgeStep
from ..analysis.network import Network
from ..analysis.timeline import activation_start, lead_activation
from .heartbeat import Heartbeat

__all__ = ["AsyncResult", "NodeRun", "by_node", "solve_async"]

#: The node field of an arrival in the queue: (time, ARRIVAL, node) comes before every
#: activation (time, node, k) that starts at that time.
ARRIVAL = -1
#: Activations a node's records hold before they first grow (then they double, up to K).
FIRST_RECORDS = 64


@dataclass
class NodeRun:
    """What one node did in one simulated layer.

    ``starts`` and ``ends`` hold each activation's (iteration's) start and end; ``versions``
    (async) the neighbour versions each activation read, one row per activation, in the
    order of the node's neighbours.
    """

    O: np.ndarray
    end: float  # when the node left the layer
    activations: int = 0
    compute: float = 0.0  # simulated seconds of compute (puts excluded)
    wait: float = 0.0  # simulated seconds waiting between activations
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0))
    versions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int32))


def by_node(steps: list[np.ndarray], nodes: int) -> np.ndarray:
    """Values recorded step by step for every node (one (M,) array per step) as one row per
    node, shape (M, steps): what :class:`NodeRun` holds of each node of a lockstep layer."""
    return np.ascontiguousarray(np.reshape(steps, (-1, nodes)).T)


@dataclass
class AsyncResult:
    """A simulated async layer: every node's run and why it ended."""

    nodes: list[NodeRun]
    all_done: bool


class _Outboxes:
    """Every node's ``Z_{m,n}`` rows as its neighbours see them: the ones delivered.

    One table holds them all, so that an activation reads its neighbours' rows in place
    (:meth:`~dssfn_mpi.algorithms.updates.EdgeStep.step_rows`). The rows in flight are the
    node's own ``Z``: its next activation, which changes it, starts once they arrived.
    """

    def __init__(self, steps: list[EdgeStep], neighbors: list[tuple[int, ...]]) -> None:
        degrees = [len(nb) for nb in neighbors]
        base = np.concatenate([[0], np.cumsum(degrees)]).tolist()
        # One row per outgoing message, as wide as the step's message (Z's rows).
        self.table = np.zeros((base[-1], int(np.prod(steps[0].Z.shape[1:]))))
        self.copies = [self.table[b : b + d].reshape(s.Z.shape)
                       for b, d, s in zip(base, degrees, steps)]  # shaped as each Z
        self.version = np.zeros(len(steps), dtype=np.int32)  # of each node's delivered rows
        slot = [{n: i for i, n in enumerate(nb)} for nb in neighbors]
        self.nbrs = [np.array(nb, dtype=np.intp) for nb in neighbors]
        # The table row of each Z_{n,m} node m reads, in the order of its neighbours.
        self.rows = [np.array([base[n] + slot[n][m] for n in nb], dtype=np.intp)
                     for m, nb in enumerate(neighbors)]

    def deliver(self, m: int, Z: np.ndarray, version: int) -> None:
        """Node ``m``'s ``Z``, its version ``version``, arrives."""
        self.copies[m][...] = Z
        self.version[m] = version


class _Records:
    """One node's activation starts, ends and read versions, in arrays that double in size
    as they fill (up to the cap K)."""

    def __init__(self, degree: int, cap: int) -> None:
        size = min(cap, FIRST_RECORDS)
        self.cap, self.count = cap, 0
        self.starts, self.ends = np.empty(size), np.empty(size)
        self.versions = np.empty((size, degree), dtype=np.int32)
        self.ended = self.ends[:0]  # the ends so far

    def add(self, start: float, end: float, versions: np.ndarray) -> None:
        """Record one activation."""
        k = self.count
        if k == self.starts.shape[0]:
            self.starts, self.ends, self.versions = (
                self._grown(a) for a in (self.starts, self.ends, self.versions))
        self.starts[k] = start
        self.ends[k] = end
        self.versions[k] = versions
        self.count = k = k + 1
        self.ended = self.ends[:k]

    def _grown(self, a: np.ndarray) -> np.ndarray:
        new = np.empty((min(2 * a.shape[0], self.cap),) + a.shape[1:], dtype=a.dtype)
        new[: a.shape[0]] = a
        return new

    def into(self, run: NodeRun) -> None:
        """Hand the records to ``run``, as long as its activations (the spare room goes)."""
        k = run.activations = self.count
        full = k == self.starts.shape[0]
        run.starts, run.ends, run.versions = (a if full else a[:k].copy()
                                              for a in (self.starts, self.ends, self.versions))
        self.starts = self.ends = self.versions = self.ended = None


def solve_async(layer: int, steps: list[EdgeStep], checks: list[NodeCheck | None],
                neighbors: list[tuple[int, ...]], begin: np.ndarray, rule: StopRule,
                iters: int, max_lead: int | None, speed, network: Network,
                message_bytes: float, beat: Heartbeat | None = None) -> AsyncResult:
    """Simulate one async layer.

    Parameters
    ----------
    layer : int
        Index of the layer (for the speed model).
    steps : list of EdgeStep
        Each node's edge step, its ``Z`` at zero.
    checks : list of NodeCheck or None
        Each node's own test under ``rule`` (None under ``iters``).
    neighbors : list of tuple
        ``graph.neighbors(m)`` of each node.
    begin : ndarray, shape (M,)
        When each node may start its first activation.
    rule : StopRule
        The layer's stopping rule.
    iters : int
        K: the activations (the cap under eps / local).
    max_lead : int or None
        The bounded delay s (None: unbounded).
    speed : SpeedModel
        Compute seconds of each activation.
    network : Network
        Message cost of a put (``alpha + bytes / beta``); alpha is the stop signal's.
    message_bytes : float
        Bytes of one Z put.
    beat : Heartbeat, optional
        Told of the simulated clock after every activation (a progress line a minute).

    Returns
    -------
    AsyncResult
    """
    loop = _EventLoop(layer, steps, checks, neighbors, begin, rule, iters, max_lead, speed,
                      network.message_seconds(message_bytes), network.alpha)
    for m in range(len(steps)):
        loop.schedule(m)
    queue, watch, count, M = loop.queue, loop.watch, 0, len(steps)
    while queue:
        t, m, k = heapq.heappop(queue)
        if m == ARRIVAL:
            loop.arrive(k)
            continue
        if watch and loop.stop_at == math.inf:
            loop.stop_by(t)
        if t >= loop.stop_at:  # so does every activation after it
            break
        loop.activate(t, m, k)
        count += 1
        if beat is not None:
            beat(t, count, M - loop.undone if watch else None, M)
    if watch and loop.stop_at == math.inf:
        loop.stop_by(math.inf)
    return loop.finish()


class _EventLoop:
    """One async layer in simulated time: the nodes' outboxes and records, the queue of
    activations (start, node, k) and arrivals (end, :data:`ARRIVAL`, node), and the done
    flags (end, node, done) of the stop rule."""

    def __init__(self, layer: int, steps: list[EdgeStep], checks: list[NodeCheck | None],
                 neighbors: list[tuple[int, ...]], begin: np.ndarray, rule: StopRule,
                 iters: int, max_lead: int | None, speed, put: float, signal: float) -> None:
        M = len(steps)
        self.layer, self.steps, self.checks, self.neighbors = layer, steps, checks, neighbors
        self.rule, self.iters, self.max_lead, self.speed = rule, iters, max_lead, speed
        self.put, self.signal, self.watch = put, signal, not rule.fixed
        self.clock = speed.cpu_clock()
        self.boxes = _Outboxes(steps, neighbors)
        self.records = [_Records(len(nb), iters) for nb in neighbors]
        self.runs = [NodeRun(O=np.zeros(steps[0].O.shape), end=float(b)) for b in begin]
        self.prev_end = [float(b) for b in begin]
        self.blocked = [-1] * M  # the neighbours' activation a node waits for (-1: none)
        self.queue: list[tuple[float, int, int]] = []
        self.flags: list[tuple[float, int, bool]] = []
        self.state, self.undone = [False] * M, M  # each node's latest flag; how many unset
        self.stop_at = math.inf
        self.passed: list[np.ndarray | None] = [None] * M  # last iterate its own test accepted

    def schedule(self, m: int) -> None:
        """Queue node ``m``'s next activation, or mark it blocked by the bounded delay."""
        rec = self.records[m]
        k = rec.count
        if k >= self.iters:
            return
        start = activation_start(self.prev_end[m], k, self.max_lead,
                                 [self.records[n].ended for n in self.neighbors[m]])
        if start is None:
            self.blocked[m] = lead_activation(k, self.max_lead)
        else:
            self.blocked[m] = -1
            heapq.heappush(self.queue, (start, m, k))

    def stop_by(self, t: float) -> None:
        """Apply the done-flag changes up to ``t``; at the first all-done moment the stop
        signal is sent, and arrives one latency later."""
        flags, state = self.flags, self.state
        while flags and flags[0][0] <= t:
            when, m, done = heapq.heappop(flags)
            if done != state[m]:
                state[m] = done
                self.undone += -1 if done else 1
            if not self.undone:
                self.stop_at = when + self.signal
                return

    def activate(self, t: float, m: int, k: int) -> None:
        """Run node ``m``'s activation ``k`` at ``t`` with the neighbour rows delivered by then."""
        step, boxes = self.steps[m], self.boxes
        c0 = self.clock()
        O = step.step_rows(boxes.table, boxes.rows[m])
        measured = self.clock() - c0
        check = self.checks[m]
        done = check is not None and check.async_done(O, step.rhs_buffer)
        if done:  # as live: a node returns the last iterate its own test accepted
            self._accept(m, O)
        cost = self.speed.activation(self.layer, m, k, measured)
        end = t + cost + self.put
        run = self.runs[m]
        run.wait += t - self.prev_end[m]
        run.compute += cost
        self.records[m].add(t, end, boxes.version[boxes.nbrs[m]])
        self.prev_end[m] = end
        heapq.heappush(self.queue, (end, ARRIVAL, m))
        if self.watch:
            heapq.heappush(self.flags, (end, m, done))
        self.schedule(m)
        blocked = self.blocked
        for n in self.neighbors[m]:
            if blocked[n] == k:  # waiting for this activation (and maybe others)
                self.schedule(n)

    def arrive(self, m: int) -> None:
        """Node ``m``'s ``Z`` of its last activation arrives at its neighbours."""
        self.boxes.deliver(m, self.steps[m].Z, self.records[m].count)

    def _accept(self, m: int, O: np.ndarray) -> None:
        if self.passed[m] is None:
            self.passed[m] = O.copy()
        else:
            self.passed[m][...] = O

    def finish(self) -> AsyncResult:
        """Every node's run: it leaves the layer at its last end or when the signal arrives;
        its ``O`` is its last iterate (the last its test accepted, when the signal came)."""
        stopped = self.stop_at < math.inf
        for m, run in enumerate(self.runs):
            self.records[m].into(run)
            run.end = self.prev_end[m] if not stopped else max(self.prev_end[m], self.stop_at)
            if stopped and self.passed[m] is not None:
                run.O[...] = self.passed[m]
            elif run.activations:
                run.O[...] = self.steps[m].O
        return AsyncResult(nodes=self.runs, all_done=stopped)
