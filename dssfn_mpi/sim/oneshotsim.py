"""The one-shot modes in simulated time: the statistics' exchange, then every node's exact solve.

Each node packs its ``G_m``, ``B_m`` with the engine's packing
(:class:`~dssfn_mpi.gramstats.StatsLayout`; the layer's ``factor`` phase). The
average is the network mean (``oneshot``: one allreduce) or ``mix_rounds``
rounds of Metropolis mixing (``oneshot-graph``: :func:`.nodes.mix`, the
sync-graph engine's arithmetic); then each node solves its averaged statistics
with :func:`dssfn_mpi.solver.exact_solve`, as live. Times follow the replay
(:func:`dssfn_mpi.timeline.oneshot_end`): the exchange once every node (the
allreduce) or its neighbours (each round) are ready, then the node's solve.
"""

from __future__ import annotations

import time

import numpy as np

from ..gramstats import StatsLayout
from ..network import Network
from ..solver import exact_solve
from ..timeline import oneshot_end
from .asyncsim import NodeRun
from .nodes import Layer, mix

__all__ = ["pack_statistics", "solve_oneshot"]


def pack_statistics(probs: list[Layer], layout: StatsLayout) -> tuple[list[np.ndarray],
                                                                       np.ndarray]:
    """Every node's packed statistics and the CPU seconds packing took (its factor phase).

    Drops each node's ``G`` once packed.
    """
    packed, cpu = [], np.empty(len(probs))
    for m, p in enumerate(probs):
        c0 = time.thread_time()
        packed.append(layout.pack(p.G, p.B))
        cpu[m] = time.thread_time() - c0
        p.G = None
    return packed, cpu


def solve_oneshot(layer: int, alg, graph, layout: StatsLayout, packed: list[np.ndarray],
                  eps: float, begin: np.ndarray, rounds: int, speed, network: Network,
                  library: str, hops: np.ndarray) -> list[NodeRun]:
    """Simulate one layer of ``oneshot`` or ``oneshot-graph``: each node's run.

    ``oneshot``'s nodes all solve the same averaged statistics: it is solved
    once and every node is charged its CPU time.
    """
    M = len(packed)
    c0 = time.thread_time()
    if alg.collective:
        mean = np.zeros(layout.size)
        for x in packed:
            mean += x
        mean /= M
        means = [mean] * M
    else:
        means = mix(graph, packed, rounds)
    share = (time.thread_time() - c0) / M if not alg.collective else 0.0
    measured, Os = np.empty(M), []
    for m in range(M):
        if alg.collective and m > 0:
            Os.append(Os[0])
            measured[m] = measured[0]
            continue
        c0 = time.thread_time()
        Os.append(exact_solve(*layout.unpack(means[m]), eps).O)
        measured[m] = time.thread_time() - c0
    cost = speed.activations(layer, 0, measured + share)
    ready = oneshot_end(alg.name, np.asarray(begin, dtype=float), hops, rounds, layout.nbytes,
                        network, library)
    end = ready + cost
    return [NodeRun(O=Os[m], end=float(end[m]), activations=1, compute=float(cost[m]),
                    wait=float(ready[m] - begin[m]), starts=[float(begin[m])],
                    ends=[float(end[m])]) for m in range(M)]
