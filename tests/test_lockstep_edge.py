"""The synchronous control of the async edge operator, in the simulator.

With every activation costing the same (``--speed const:S``), the layer starting together and
``--max-lead 0``, the simulated async engine runs the edge update in lockstep (Jacobi): at its
activation k every node reads exactly version k of every neighbour (what each neighbour wrote
at its activation k - 1), none newer, none older. docs/ALGORITHMS.md uses it to separate the
cost of asynchrony from that of the graph and the formulation.
"""

from __future__ import annotations

import numpy as np

from dssfn_mpi.algorithms.stoprule import parse_stop
from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.sim.asyncsim import solve_async
from dssfn_mpi.sim.speed import SpeedModel


class _Counter:
    """A stand-in edge step: its rows hold how many activations the node has done."""

    def __init__(self, degree: int) -> None:
        self.Z = np.zeros((degree, 1, 2))
        self.O = np.zeros((1, 2))
        self.rhs_buffer = None
        self.reads: list[list[float]] = []

    def __call__(self, Zr):
        self.reads.append([float(z[0, 0]) for z in Zr])
        self.Z += 1.0
        return self.O

    def step_rows(self, table, rows):
        """The activation on the neighbours' rows of ``table`` (as the drivers call it)."""
        return self(table[rows, : self.O.size].reshape(-1, *self.O.shape))


def test_const_speed_and_max_lead_0_is_lockstep():
    graph = make_topology("circular", 10, degree=4)
    nbrs = [tuple(graph.neighbors(m)) for m in range(10)]
    steps = [_Counter(len(nb)) for nb in nbrs]
    K = 12
    speed = SpeedModel.build("const:1e-3", 10, 1, K, {}, None, None, 0)
    res = solve_async(0, steps, [None] * 10, nbrs, np.zeros(10), parse_stop("iters"), K, 0,
                      speed, parse_network("shm"), 64.0)
    for m, step in enumerate(steps):
        assert res.nodes[m].activations == K
        # Activation k read version k of every neighbour (its rows after k activations).
        assert step.reads == [[float(k)] * len(nbrs[m]) for k in range(K)], (m, step.reads)
    # A 2x straggler without the bound: its neighbours read it late (not lockstep).
    steps = [_Counter(len(nb)) for nb in nbrs]
    slow = SpeedModel.build("const:1e-3", 10, 1, K, {3: 2.0}, None, None, 0)
    solve_async(0, steps, [None] * 10, nbrs, np.zeros(10), parse_stop("iters"), K, None,
                slow, parse_network("shm"), 64.0)
    assert any(r != [float(k)] * len(r) for s in steps for k, r in enumerate(s.reads))
