"""The "all done" signals of --stop eps / local under mpirun: the async engine's board and
the sync-graph engine's votes carried in its mixing rounds.

Run: ``mpirun -n 3 python -m pytest --with-mpi -q tests/mpi/test_votes.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(60, method="thread")


def _comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.mark.mpi(min_size=2)
def test_board_ends_a_layer_once_every_rank_is_done_and_keeps_it_ended():
    from dssfn_mpi.mailbox.doneboard import DoneBoard

    comm = _comm()
    me, size = comm.Get_rank(), comm.Get_size()
    board = DoneBoard(comm, layers=3)
    try:
        board.vote(1, me != size - 1)  # everyone but the last rank is done
        comm.Barrier()
        assert not board.ended(1)
        comm.Barrier()
        board.vote(1, True)
        comm.Barrier()
        assert board.ended(1)  # every flag reads as done: the reader ends the layer
        comm.Barrier()
        board.vote(1, False)  # a rank's test fails again afterwards ...
        comm.Barrier()
        assert board.ended(1)  # ... the decision stands
        assert not board.ended(2)  # another layer's row is untouched
        comm.Barrier()
    finally:
        board.free()


@pytest.mark.mpi(min_size=3)
def test_sync_graph_votes_take_the_minimum_over_the_rounds_hops():
    from dssfn_mpi.config import TrainConfig
    from dssfn_mpi.engines.base import RunContext
    from dssfn_mpi.engines.sync_graph import SyncGraphEngine
    from dssfn_mpi.graph.topology import make_topology

    comm = _comm()
    me, size = comm.Get_rank(), comm.Get_size()
    graph = make_topology("ring", size)
    cfg = TrainConfig(mode="sync-graph", mix_rounds=1, stop="eps:1e-2")
    engine = SyncGraphEngine(RunContext(comm=comm, graph=graph, cfg=cfg, n_classes=2,
                                        max_width=3))
    try:
        # Two votes: rank 0 is not done in the first, everyone in the second.
        x = np.array([float(me), 2.0 * me, 0.0 if me == 0 else 1.0, 1.0])
        out = np.empty_like(x)
        engine.average(x, out, votes=2)
        near_0 = me == 0 or 0 in graph.neighbors(me)
        assert out[2] == (0.0 if near_0 else 1.0)  # one round: one hop
        assert out[3] == 1.0
        # The values themselves are mixed (Metropolis weights keep the sum), not min'ed.
        total = comm.allreduce(out[:2].copy())
        assert np.allclose(total, [sum(range(size)), 2.0 * sum(range(size))])
        assert engine.vote_delay() == -(-graph.diameter // 1)
    finally:
        engine.close()
