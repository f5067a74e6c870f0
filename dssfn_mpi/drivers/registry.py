"""The driver kinds, each one object: the one table of how every kind runs.

``one-sided``
    every node activates at its own pace, reads its neighbours' latest messages from its
    window and puts its own into theirs (ARock; no handshake, no collective);
``lockstep``
    the same per-node step, every node activating once per round: round k reads exactly
    the neighbours' messages of round k-1 (Jacobi), exchanged with the neighbours alone;
``consensus``
    every node runs iterations in lockstep, each averaging one vector over the network:
    by one allreduce (``allreduce``) or by rounds of neighbour mixing (``mixing``);
``one-shot``
    every node averages its statistics once (``allreduce`` or ``mixing``) and solves exactly;
``central``
    one process solves the layer on all the data.
"""

from __future__ import annotations

from .base import Driver

__all__ = ["CENTRAL", "CONSENSUS", "DRIVERS", "LOCKSTEP", "ONE_SHOT", "ONE_SIDED",
           "register_driver"]

_E, _S, _R = "dssfn_mpi.engines.", "dssfn_mpi.sim.layersolve:", "dssfn_mpi.analysis.replayrules:"

ONE_SIDED = Driver(
    "one-sided", live=_E + "async_arock:AsyncEngine", simulated=_S + "simulate_one_sided",
    replayed=_R + "replay_one_sided", one_sided=True, per_neighbour=True,
    summary="asynchronous: one-sided writes into the neighbours' windows (ARock)")
LOCKSTEP = Driver(
    "lockstep", live=_E + "lockstep:LockstepEngine", simulated=_S + "simulate_lockstep",
    replayed=_R + "replay_lockstep", per_neighbour=True,
    summary="the per-node step in Jacobi rounds, exchanged with the neighbours alone")
CONSENSUS = Driver(
    "consensus",
    live={"allreduce": _E + "sync_allreduce:SyncAllreduceEngine",
          "mixing": _E + "sync_graph:SyncGraphEngine"},
    simulated=_S + "simulate_consensus",
    replayed={"allreduce": _R + "replay_allreduce", "mixing": _R + "replay_mixing"},
    summary="iterations in lockstep, each averaging one vector over the network")
ONE_SHOT = Driver(
    "one-shot", live=_E + "oneshot:OneshotEngine", simulated=_S + "simulate_one_shot",
    replayed=_R + "replay_one_shot", direct=True, exchanges_statistics=True,
    summary="the statistics averaged once, then an exact solve")
CENTRAL = Driver("central", live=_E + "exact:ExactEngine", direct=True, decentralized=False,
                 summary="one process solves the layer on all the data")

#: Every driver kind.
DRIVERS: list[Driver] = [ONE_SIDED, LOCKSTEP, CONSENSUS, ONE_SHOT, CENTRAL]


def register_driver(driver: Driver) -> Driver:
    """Add ``driver`` (or replace the one of the same name); returns it."""
    for i, known in enumerate(DRIVERS):
        if known.name == driver.name:
            DRIVERS[i] = driver
            return driver
    DRIVERS.append(driver)
    return driver
