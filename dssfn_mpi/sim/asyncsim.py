"""The async engine in simulated time: a priority queue of activations.

Per node m and activation k (the rules of :mod:`dssfn_mpi.engines.async_arock`
and of :mod:`dssfn_mpi.analysis.timeline`, docs/REPLAY.md): it starts when the node's
activation k-1 ended and, under ``--max-lead s``, version k-s of every neighbour has arrived
(that neighbour's activation k-s-1 ended); it reads the latest ``Z_{n,m}`` that
has arrived from each neighbour; it runs :class:`~dssfn_mpi.engines.updates.EdgeStep`
(the engine's own step, compiled when numba is installed, as live); it lasts
its compute (:mod:`.speed`) plus its puts, one message of the network model,
and its new ``Z`` arrives at its neighbours when it ends.

Activations are executed in order of their start times. Each node runs one
activation at a time, so when a node reads at time t each neighbour has at most
one activation that started before t and has not ended: its outbox is double
buffered (the delivered ``Z`` and the one in flight with its arrival time).

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
from ..analysis.network import Network
from ..analysis.timeline import activation_start
from ..engines.updates import EdgeStep

__all__ = ["AsyncResult", "NodeRun", "solve_async"]


@dataclass
class NodeRun:
    """What one node did in one simulated layer."""

    O: np.ndarray
    end: float  # when the node left the layer
    activations: int = 0
    compute: float = 0.0  # simulated seconds of compute (puts excluded)
    wait: float = 0.0  # simulated seconds waiting between activations
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    versions: list[np.ndarray] = field(default_factory=list)  # each read's versions


@dataclass
class AsyncResult:
    """A simulated async layer: every node's run and why it ended."""

    nodes: list[NodeRun]
    all_done: bool


class _Outbox:
    """A node's ``Z_{m,n}`` rows as its neighbours see them: delivered, and in flight.

    Both live in the event loop's table of every outbox's rows, so that an activation reads
    its neighbours' rows in place (:meth:`~dssfn_mpi.engines.updates.EdgeStep.step_rows`):
    the node's rows start at ``base`` in the delivered half and at ``base + half`` in the other.
    """

    def __init__(self, table: np.ndarray, base: int, count: int) -> None:
        self.table, self.count, self.half = table, count, table.shape[0] // 2
        self.delivered, self.flight = base, base + self.half  # first row of each
        self.version, self.flight_version, self.arrives = 0, 0, math.inf

    def deliver(self, t: float) -> None:
        if self.arrives <= t:
            self.delivered, self.flight = self.flight, self.delivered
            self.version, self.arrives = self.flight_version, math.inf

    def send(self, rows: np.ndarray, version: int, arrives: float, now: float) -> None:
        self.deliver(now)
        self.table[self.flight : self.flight + self.count, : rows.shape[1]] = rows
        self.flight_version, self.arrives = version, arrives


def solve_async(layer: int, steps: list[EdgeStep], checks: list[NodeCheck | None],
                neighbors: list[tuple[int, ...]], begin: np.ndarray, rule: StopRule,
                iters: int, max_lead: int | None, speed, network: Network,
                message_bytes: float) -> AsyncResult:
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

    Returns
    -------
    AsyncResult
    """
    loop = _EventLoop(layer, steps, checks, neighbors, begin, rule, iters, max_lead, speed,
                      network.message_seconds(message_bytes), network.alpha)
    for m in range(len(steps)):
        loop.schedule(m)
    while loop.queue:
        t, m, k = heapq.heappop(loop.queue)
        if not rule.fixed and loop.stop_at == math.inf:
            loop.stop_by(t)
        if t < loop.stop_at:
            loop.activate(t, m, k)
    if not rule.fixed and loop.stop_at == math.inf:
        loop.stop_by(math.inf)
    return loop.finish()


class _EventLoop:
    """One async layer in simulated time: the nodes' outboxes and runs, the queue of
    activations (start, node, k) and the done flags (end, node, done) of the stop rule."""

    def __init__(self, layer: int, steps: list[EdgeStep], checks: list[NodeCheck | None],
                 neighbors: list[tuple[int, ...]], begin: np.ndarray, rule: StopRule,
                 iters: int, max_lead: int | None, speed, put: float, signal: float) -> None:
        M = len(steps)
        self.layer, self.steps, self.checks, self.neighbors = layer, steps, checks, neighbors
        self.rule, self.iters, self.max_lead, self.speed = rule, iters, max_lead, speed
        self.put, self.signal = put, signal
        self.clock = speed.cpu_clock()
        slot = [{n: i for i, n in enumerate(nb)} for nb in neighbors]
        # Row of Z_{n,m} in n's outbox, for each node m and neighbour index i.
        self.rows = [[slot[n][m] for n in neighbors[m]] for m in range(M)]
        self.shape = steps[0].O.shape
        degrees = [len(nb) for nb in neighbors]
        base = np.concatenate([[0], np.cumsum(degrees)]).tolist()
        # One row per outgoing message, as wide as the step's message (Z's rows).
        self.table = np.zeros((2 * base[-1], int(np.prod(steps[0].Z.shape[1:]))))
        self.boxes = [_Outbox(self.table, base[m], degrees[m]) for m in range(M)]
        self.runs = [NodeRun(O=np.zeros(self.shape), end=float(begin[m])) for m in range(M)]
        self.prev_end = [float(b) for b in begin]
        self.blocked = [False] * M
        self.queue: list[tuple[float, int, int]] = []
        self.flags: list[tuple[float, int, bool]] = []
        self.state = np.zeros(M, dtype=bool)
        self.stop_at = math.inf
        self.passed: list[np.ndarray | None] = [None] * M  # last iterate its own test accepted

    def schedule(self, m: int) -> None:
        """Queue node ``m``'s next activation, or mark it blocked by the bounded delay."""
        k = self.runs[m].activations
        if k >= self.iters:
            return
        start = activation_start(self.prev_end[m], k, self.max_lead,
                                 [self.runs[n].ends for n in self.neighbors[m]])
        self.blocked[m] = start is None
        if start is not None:
            heapq.heappush(self.queue, (start, m, k))

    def stop_by(self, t: float) -> None:
        """Apply the done-flag changes up to ``t``; at the first all-done moment the stop
        signal is sent, and arrives one latency later."""
        while self.flags and self.flags[0][0] <= t:
            when, m, done = heapq.heappop(self.flags)
            self.state[m] = done
            if self.state.all():
                self.stop_at = when + self.signal
                return

    def activate(self, t: float, m: int, k: int) -> None:
        """Run node ``m``'s activation ``k`` at ``t`` with the neighbour rows delivered by then."""
        run, nbrs = self.runs[m], self.neighbors[m]
        boxes = [self.boxes[n] for n in nbrs]
        for box in boxes:
            box.deliver(t)
        rows = np.array([box.delivered + r for box, r in zip(boxes, self.rows[m])],
                        dtype=np.intp)
        c0 = self.clock()
        O = self.steps[m].step_rows(self.table, rows)
        measured = self.clock() - c0
        check = self.checks[m]
        done = check.async_done(O, self.steps[m].rhs_buffer) if check is not None else False
        cost = self.speed.activation(self.layer, m, k, measured)
        end = t + cost + self.put
        run.O[...] = O
        if done:  # as live: a node returns the last iterate its own test accepted
            self.passed[m] = O.copy()
        run.versions.append(np.array([self.boxes[n].version for n in nbrs], dtype=np.int64))
        run.wait += t - self.prev_end[m]
        run.compute += cost
        run.starts.append(t)
        run.ends.append(end)
        run.activations += 1
        self.prev_end[m] = end
        self.boxes[m].send(self.steps[m].Z.reshape(len(nbrs), -1), k + 1, end, t)
        if not self.rule.fixed:
            heapq.heappush(self.flags, (end, m, done))
        self.schedule(m)
        for n in nbrs:
            if self.blocked[n]:
                self.schedule(n)

    def finish(self) -> AsyncResult:
        """Every node's run: it leaves the layer at its last end or when the signal arrives."""
        stopped = self.stop_at < math.inf
        for m, run in enumerate(self.runs):
            run.end = self.prev_end[m] if not stopped else max(self.prev_end[m], self.stop_at)
            if stopped and self.passed[m] is not None:
                run.O[...] = self.passed[m]
        return AsyncResult(nodes=self.runs, all_done=stopped)
