"""The lockstep driver in simulated time: the one-sided step in Jacobi rounds.

Per round k every node runs its algorithm's step (``step_rows``, the live drivers' own,
compiled when numba is installed) on exactly the messages its neighbours sent after round
k-1 (zeros in round 0), then exchanges its new messages with its neighbours, as
:mod:`dssfn_mpi.engines.lockstep` does. Times follow the rules of
:mod:`dssfn_mpi.analysis.timeline` (docs/REPLAY.md): round k on node m starts when m and every
neighbour of m have finished round k-1's compute, plus one message time
(:func:`~dssfn_mpi.analysis.timeline.exchange_end`, one round). An algorithm whose round has two
phases (``hood-jacobi``: :meth:`~dssfn_mpi.algorithms.Algorithm.phases`) runs both on every
node, the second on the messages of the first's exchange, and its round costs two message
times (:meth:`~dssfn_mpi.algorithms.Algorithm.round_exchanges`), the round's compute counted
before them; ``--speed``, ``--jitter`` and ``--slow`` set each compute.

Under ``--stop eps:E`` / ``local:TOL`` the layer ends after round k when every node passed
its own test of round ``k - A + 1`` (``A`` = :func:`~dssfn_mpi.engines.lockstep.vote_slots`,
the votes riding in the messages as live), each node with its iterate of that round.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from ..algorithms.stoprule import NodeCheck
from ..analysis.timeline import exchange_end
from ..engines.lockstep import vote_slots
from .asyncsim import NodeRun, by_node

__all__ = ["solve_lockstep"]


def solve_lockstep(run: Any, layer: int, steps: list[Any], checks: list[NodeCheck | None],
                   begin: np.ndarray, message_bytes: float) -> tuple[list[NodeRun], bool]:
    """Simulate one lockstep layer.

    Parameters
    ----------
    run : SolveContext
        What the layer's solve needs of the run (:class:`~dssfn_mpi.sim.layerloop.SolveContext`).
    layer : int
        Index of the layer (for the speed model).
    steps : list
        Each node's step (its algorithm's ``step``), its messages at zero.
    checks : list of NodeCheck or None
        Each node's own test (None under ``iters``).
    begin : ndarray, shape (M,)
        When each node may start its first round.
    message_bytes : float
        Bytes of one message.

    Returns
    -------
    (list of NodeRun, bool)
        Each node's run and whether every node was done.
    """
    nbrs, M, speed, alg = run.neighbors, len(steps), run.opts.speed, run.cfg.algorithm
    exchanges, message = alg.round_exchanges(run.opts.network, message_bytes)
    A = vote_slots(run.rule, run.graph)
    exchange = _Exchange([alg.phases(s) for s in steps], nbrs)
    runs = [NodeRun(O=np.zeros(steps[m].O.shape), end=float(begin[m])) for m in range(M)]
    flags: deque[np.ndarray] = deque(maxlen=A)
    tested: deque[list[np.ndarray]] = deque(maxlen=A)
    t, ended = np.asarray(begin, dtype=float).copy(), False
    starts, ends = [], []  # every node's, per round
    for k in range(run.cfg.iters):
        measured, flag, Os = np.zeros(M), np.zeros(M, dtype=bool), []
        for p in range(exchanges):
            for m in range(M):
                c0 = time.thread_time()
                O = exchange.step(m, p)
                if p == exchanges - 1:
                    if checks[m] is not None:
                        flag[m] = checks[m].async_done(O, steps[m].rhs_buffer)
                    Os.append(O.copy())
                measured[m] += time.thread_time() - c0
            exchange.send(p)
        cost = speed.activations(layer, k, measured)
        ready = t + cost
        end = exchange_end(ready, run.hops, exchanges, message)
        starts.append(t)
        ends.append(end)
        for m, node in enumerate(runs):
            node.compute += float(cost[m])
            node.wait += float(end[m] - ready[m])
            node.activations += 1
            node.O = Os[m]
        t = end
        if A:
            flags.append(flag)
            tested.append(Os)
            ended = len(flags) == A and bool(flags[0].all())
            if ended:
                for m, node in enumerate(runs):
                    node.O = tested[0][m]
                break
    starts, ends = (by_node(x, M) for x in (starts, ends))
    for m, node in enumerate(runs):
        node.end = float(t[m])
        node.starts, node.ends = starts[m], ends[m]
    return runs, ended


class _Exchange:
    """Every node's received messages of each phase's exchange (rows of a table, as the
    live driver receives them) and the exchanges."""

    def __init__(self, phases: list[list[tuple[Any, np.ndarray]]],
                 nbrs: list[tuple[int, ...]]) -> None:
        self.phases, self.nbrs = phases, nbrs
        slot = [{n: i for i, n in enumerate(nb)} for nb in nbrs]
        # Row of node n's message for m in n's outbox, for each node m and neighbour index i.
        self.rows = [[slot[n][m] for n in nb] for m, nb in enumerate(nbrs)]
        self.tables = [[np.zeros((len(nb), out[0].size))
                        for nb in nbrs] for _, out in phases[0]]
        self.index = [np.arange(len(nb), dtype=np.intp) for nb in nbrs]

    def step(self, m: int, p: int) -> Any:
        """Node ``m``'s phase ``p`` on the messages of the exchange before it (phase 0: the
        previous round's last)."""
        return self.phases[m][p][0](self.tables[p - 1][m], self.index[m])

    def send(self, p: int) -> None:
        """Phase ``p``'s messages of every node, once all have run it."""
        for m, nb in enumerate(self.nbrs):
            for i, (n, r) in enumerate(zip(nb, self.rows[m])):
                self.tables[p][m][i] = np.reshape(self.phases[n][p][1][r], -1)
