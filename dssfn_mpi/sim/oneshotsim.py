"""The one-shot modes in simulated time: the statistics' exchange, then every node's exact solve.

Each node packs its ``G_m``, ``B_m`` with the engine's packing
(:class:`~dssfn_mpi.ssfn.gramstats.StatsLayout`; the layer's ``factor`` phase). The
average is the network mean (``oneshot``: one allreduce) or ``mix_rounds``
rounds of Metropolis mixing (``oneshot-graph``: :mod:`.mixing`, the
sync-graph engine's arithmetic, :data:`~.mixing.BLOCK` nodes at a time; each node is
charged the rounds' arithmetic as a live node runs it, :meth:`~.mixing.Mixer.compute_seconds`);
then each node solves its averaged statistics with
:func:`dssfn_mpi.ssfn.solver.exact_solve`, as live.
Times follow the replay (:func:`dssfn_mpi.analysis.timeline.oneshot_end`): the exchange
once every node (the allreduce) or its neighbours (each round) are ready, then the node's solve.
"""

from __future__ import annotations

import time

import numpy as np

from ..analysis.network import Network
from ..analysis.timeline import oneshot_end
from ..ssfn.gramstats import StatsLayout
from ..ssfn.solver import exact_solve
from .asyncsim import NodeRun
from .mixing import Mixer, mixer

__all__ = ["solve_oneshot"]


def solve_oneshot(layer: int, alg, graph, layout: StatsLayout, packed: np.ndarray,
                  eps: float, begin: np.ndarray, rounds: int, speed, network: Network,
                  library: str, hops: np.ndarray) -> list[NodeRun]:
    """Simulate one layer of ``oneshot`` or ``oneshot-graph``: each node's run.

    ``packed`` holds each node's packed statistics, one row per node.

    ``oneshot``'s nodes all solve the same averaged statistics: it is solved
    once and every node is charged its CPU time.
    """
    M = len(packed)
    if alg.collective:
        mean = np.zeros(layout.size)
        for x in packed:
            mean += x
        mean /= M
        c0 = time.thread_time()
        O = exact_solve(*layout.unpack(mean), eps).O
        measured = np.full(M, time.thread_time() - c0)
        Os, share = [O] * M, 0.0
    else:
        mix = mixer(graph, rounds)
        Os, measured = _solve_mixed(mix, layout, packed, eps)
        share = mix.compute_seconds((layout.size,), speed.cpu_clock())
    cost = speed.activations(layer, 0, measured + share)
    ready = oneshot_end(alg.name, np.asarray(begin, dtype=float), hops, rounds, layout.nbytes,
                        network, library)
    end = ready + cost
    return [NodeRun(O=Os[m], end=float(end[m]), activations=1, compute=float(cost[m]),
                    wait=float(ready[m] - begin[m]), starts=np.array([begin[m]], dtype=float),
                    ends=end[m : m + 1].copy()) for m in range(M)]


def _solve_mixed(mix: Mixer, layout: StatsLayout, packed: np.ndarray, eps: float
                 ) -> tuple[list[np.ndarray], np.ndarray]:
    """Each node's solve of its mixed statistics: the solutions and each node's solve
    seconds. The mixed statistics are formed :data:`~.mixing.BLOCK` nodes at a time where
    the mixing goes through a dense product."""
    measured, Os = np.empty(len(packed)), []
    for lo, means in mix.blocks(packed):
        for m, x in enumerate(means, lo):
            c0 = time.thread_time()
            Os.append(exact_solve(*layout.unpack(x), eps).O)
            measured[m] = time.thread_time() - c0
    return Os, measured
