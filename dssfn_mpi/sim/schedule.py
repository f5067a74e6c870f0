"""Re-execute a traced async run's reads: every activation reads the versions it read live.

A traced run log (``/trace/versions[l, m, k, i]``: the version of neighbour
``i``'s ``Z`` that activation k of rank m read; 0 = nothing yet) fixes the
async engine's numerics completely: given the same data, penalties and reads,
:class:`~dssfn_mpi.algorithms.updates.EdgeStep` gives the same iterates. Here the
activations run in an order that respects those reads (an activation waits
until its neighbours have produced the versions it needs), keeping every
version of every node's outbox, so memory grows with K: this mode is for
checking the simulator against live runs, not for scale.

The times of such a layer follow the bounded-delay rule alone
(:func:`dssfn_mpi.analysis.timeline.bounded_delay`), which does not depend on what was read.
"""

from __future__ import annotations

import time

import numpy as np

from ..algorithms.updates import EdgeStep
from ..errors import UserError
from .asyncsim import NodeRun

__all__ = ["node_runs", "replay_reads"]


def replay_reads(steps: list[EdgeStep], neighbors: list[tuple[int, ...]],
                 versions: np.ndarray, source: str = "the trace") -> tuple[list[np.ndarray],
                                                                           np.ndarray]:
    """Run every node's activations with the neighbour versions of ``versions``.

    Parameters
    ----------
    steps : list of EdgeStep
        Each node's edge step, ``Z`` at zero.
    neighbors : list of tuple
        ``graph.neighbors(m)``, the order of the trace's neighbour axis.
    versions : ndarray, shape (M, K, D)
        The layer's ``/trace/versions`` (padded with -1).
    source : str
        For messages.

    Returns
    -------
    (list of ndarray, ndarray)
        Each node's final ``O`` and the thread CPU seconds of every
        activation, shape (M, K).

    Raises
    ------
    UserError
        Reads that no execution order can satisfy (a damaged trace).
    """
    M, K = versions.shape[:2]
    shape, message = steps[0].O.shape, steps[0].Z.shape[1:]
    slot = [{n: i for i, n in enumerate(nb)} for nb in neighbors]
    # history[m][v]: node m's outbox rows after its v-th activation (v = 0: zeros).
    history = [[s.Z.reshape(len(neighbors[m]), -1).copy()] for m, s in enumerate(steps)]
    done = [0] * M
    final = [np.zeros(shape) for _ in range(M)]
    cpu = np.zeros((M, K))
    progress = True
    while progress:
        progress = False
        for m in range(M):
            while done[m] < K:
                k = done[m]
                want = versions[m, k, : len(neighbors[m])]
                if any(want[i] > done[n] for i, n in enumerate(neighbors[m])):
                    break
                Zr = [history[n][int(want[i])][slot[n][m]].reshape(message)
                      for i, n in enumerate(neighbors[m])]
                c0 = time.thread_time()
                O = steps[m](Zr)
                cpu[m, k] = time.thread_time() - c0
                final[m][...] = O
                history[m].append(steps[m].Z.reshape(len(neighbors[m]), -1).copy())
                done[m] += 1
                progress = True
    if min(done) < K:
        raise UserError(f"{source}: its recorded reads cannot all be satisfied (a read of a "
                        "version not yet written); the file is damaged")
    return final, cpu


def node_runs(final: list[np.ndarray], start: np.ndarray, end: np.ndarray,
              cost: np.ndarray, put: float, versions: np.ndarray,
              neighbors: list[tuple[int, ...]], begin: np.ndarray) -> list[NodeRun]:
    """The :class:`NodeRun` of each node of a replayed-reads layer."""
    runs = []
    for m, O in enumerate(final):
        gaps = start[m] - np.concatenate([[begin[m]], end[m, :-1]])
        runs.append(NodeRun(
            O=O, end=float(end[m, -1]), activations=int(cost.shape[1]),
            compute=float((cost[m] - put).sum()), wait=float(gaps.sum()),
            starts=start[m], ends=end[m], versions=versions[m, :, : len(neighbors[m])]))
    return runs
