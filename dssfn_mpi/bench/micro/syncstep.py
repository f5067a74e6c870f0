"""One synchronous iteration against its floor, for the activation benchmark.

The sync engines' iteration (``--mode sync``: consensus ADMM averaged by an
allreduce; ``--mode sync-graph``: the same averaged by rounds of neighbour
mixing, one round here) measured as :mod:`dssfn_mpi.bench.micro.activation` measures
an async activation, on the same star graphs: rank 0 with ``d`` neighbours,
every rank of the star running the iteration in step (a collective needs them
all). The parts, in thread CPU and wall time:

* ``local``: the iteration's arithmetic (``consensus_primal`` with its product,
  ``consensus_dual``, and sync-graph's mixing sums), what the engines run
  (:mod:`dssfn_mpi.algorithms.updates`);
* ``collective``: the ``Iallreduce`` of ``Q x n`` (sync) or the
  ``Ineighbor_allgather`` over the star (sync-graph), awaited by sleeping
  between tests (no spinning CPU; the CPU of those tests while the other ranks
  arrive is counted, in the iteration as in the floor);
* ``total``: all of it;
* ``product``: the local inverse applied alone (the compute floor, as async's);
* ``alone``: the same collective on the same buffers with no arithmetic.

The floor is ``product + alone``: what the iteration cannot avoid. Repetitions
alternate the order of iteration and floor, as the async benchmark does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ENGINES", "SYNC_PARTS", "await_sleeping", "measure_sync", "sync_ratios"]

#: The engines measured, in the order of the results' first axis.
ENGINES = ("sync", "sync-graph")
#: Timed parts of one repetition.
SYNC_PARTS = ("local", "collective", "total", "product", "alone")


def await_sleeping(request: Any) -> None:
    """Wait for a non-blocking MPI request by sleeping between tests (no busy polling).

    Polls at most every millisecond: with fewer cores than ranks the waiting rank leaves its
    core to the others. In a timed collective the polls' CPU while the other ranks arrive is
    counted, the same in iteration and floor.
    """
    from ...mailbox.waiting import sleep_until

    if not sleep_until(request.Test, 600.0, max_delay=1e-3).ready:
        raise RuntimeError("a rank of the activation benchmark did not reach a barrier or "
                           "collective")


def _one(sub: Any, dcomm: Any, engine: str, inv: Any, B2: np.ndarray, w_self: float,
         w_nbr: np.ndarray, reps: int, timed: bool) -> np.ndarray:
    """Repetitions of one engine on this rank; (2, parts, reps) CPU and wall seconds."""
    import time

    from mpi4py import MPI

    from ...algorithms.registry import lookup
    from ...algorithms.updates import consensus_dual, consensus_primal
    from ...graph.mixing import mix_round

    q, n = B2.shape
    rho, eps, size = 1.0, 1e6, sub.Get_size()
    U, Zbar, mean = np.zeros((q, n)), np.zeros((q, n)), np.empty((q, n))
    recv = np.empty((len(w_nbr), q, n))
    out = np.empty((q, n))
    stamps = np.zeros((2, reps, 7), dtype=np.int64)  # cpu, wall

    def clock(r: int, k: int) -> None:
        if timed:
            stamps[0, r, k] = time.thread_time_ns()
            stamps[1, r, k] = time.perf_counter_ns()

    collective = lookup(engine).collective  # else one round of neighbour mixing

    def average(x: np.ndarray) -> None:
        if collective:
            await_sleeping(sub.Iallreduce(x, mean, op=MPI.SUM))
        else:
            mean[...] = x
            await_sleeping(dcomm.Ineighbor_allgather(mean, recv))

    for r in range(reps):
        await_sleeping(sub.Ibarrier())
        for part in ("floor", "iteration") if r % 2 else ("iteration", "floor"):
            if part == "iteration":
                clock(r, 0)
                O = consensus_primal(inv, B2, rho, Zbar, U)
                x = O + U
                clock(r, 1)
                average(x)
                clock(r, 2)
                if collective:
                    mean /= size
                else:  # one mixing round, as SyncGraphEngine.average
                    mix_round(mean, recv, w_self, w_nbr)
                Zbar = consensus_dual(mean, eps, O, U)
                clock(r, 3)
            else:
                clock(r, 4)
                inv.apply(B2, out=out)
                clock(r, 5)
                average(out)
                clock(r, 6)
    cpu_wall = []
    for s in stamps:
        d = np.diff(s, axis=1)
        local = d[:, 0] + d[:, 2]
        cpu_wall.append(1e-9 * np.stack([local, d[:, 1], s[:, 3] - s[:, 0], d[:, 4], d[:, 5]]))
    return np.array(cpu_wall)


def measure_sync(comm: Any, degrees: tuple[int, ...], q: int, n: int, samples: int,
                 Y: np.ndarray | None, G: np.ndarray | None,
                 reps: int) -> dict[str, np.ndarray] | None:
    """Both sync engines' iterations for every degree (collective over ``comm``).

    Rank 0 (the hub) uses the local inverse of ``Y`` (``G = Y Y^T``, ``samples``
    columns); the neighbours one of their own from as many samples (the same
    size and form). Returns, on rank 0,
    ``cpu_seconds`` and ``wall_seconds`` of shape ``(engines, degrees, parts,
    reps)``; None elsewhere.
    """
    from mpi4py import MPI

    from ...ssfn.solver import LocalInverse

    rank = comm.Get_rank()
    if rank != 0:  # a neighbour's inverse: the same size and form, its own data
        Y = np.random.default_rng(rank).standard_normal((n, samples)) / np.sqrt(samples)
        G = None
    assert Y is not None
    inv = LocalInverse(Y, 1.0, G)
    B2 = np.random.default_rng(11 + rank).standard_normal((q, n))
    res = np.zeros((2, len(ENGINES), len(degrees), len(SYNC_PARTS), reps))
    for k, d in enumerate(degrees):
        member = rank <= d
        sub = comm.Split(0 if member else MPI.UNDEFINED, rank)
        if member:
            nbrs = list(range(1, d + 1)) if rank == 0 else [0]
            dcomm = sub.Create_dist_graph_adjacent(nbrs, nbrs, reorder=False)
            w = 1.0 / (1 + d)  # Metropolis weights on the star
            for e, engine in enumerate(ENGINES):
                res[:, e, k] = _one(sub, dcomm, engine, inv, B2, 1.0 - w * len(nbrs),
                                    np.full(len(nbrs), w), reps, rank == 0)
            dcomm.Free()
            sub.Free()
        await_sleeping(comm.Ibarrier())
    if rank != 0:
        return None
    return {"cpu_seconds": res[0], "wall_seconds": res[1]}


def sync_ratios(t: np.ndarray) -> np.ndarray:
    """Median over repetitions of total / (product + alone); ``t`` (..., parts, reps)."""
    p = SYNC_PARTS.index
    return np.median(t[..., p("total"), :] / (t[..., p("product"), :] + t[..., p("alone"), :]),
                     axis=-1)
