"""The timing rules shared by replay and simulate (dssfn_mpi.analysis.timeline), serially.

Hand-worked cases on small graphs; a message costs round numbers on the test
network (alpha = 0.1 s, beta = 100 B/s: 10 bytes cost 0.2 s). Each rule's
whole-layer form (replay, ``simulate --schedule``) is checked against its
step-by-step form (the simulator's event loop and lockstep iterations).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import shortest_path

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.analysis.network import Network, allreduce_seconds
from dssfn_mpi.analysis.timeline import (
    PENALTY_BYTES,
    TimingModel,
    activation_start,
    bounded_delay,
    collective_end,
    exchange_end,
    graph_times,
    hop_distances,
    lead_activation,
    neighbor_table,
    neighbour_max,
    oneshot_end,
    sync_times,
)
from dssfn_mpi.graph.topology import make_topology

NET = Network("test", alpha=0.1, beta=100.0)
RING6 = [(1, 5), (0, 2), (1, 3), (2, 4), (3, 5), (4, 0)]
PATH3 = [(1,), (0, 2), (1,)]


def test_neighbor_table_pads_with_minus_one_and_passes_tables_through():
    table = neighbor_table(PATH3)
    assert table.tolist() == [[1, -1], [0, 2], [1, -1]]
    assert neighbor_table(table) is table
    assert neighbor_table([]).shape == (0, 0)


def test_hop_distances_by_hand():
    assert hop_distances(PATH3).tolist() == [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
    ring = hop_distances(RING6)
    assert ring[0].tolist() == [0, 1, 2, 3, 2, 1]
    assert (ring == ring.T).all()
    # Two separate edges: no path between them.
    apart = hop_distances([(1,), (0,), (3,), (2,)])
    assert apart[0, 2] == np.inf and apart[2, 3] == 1


def test_hop_distances_equal_scipy_shortest_paths():
    for degree in (2, 4):
        graph = make_topology("random-regular", 12, degree, seed=3)
        nbrs = [graph.neighbors(m) for m in range(12)]
        want = shortest_path(graph.adjacency_matrix().astype(float), unweighted=True)
        assert np.array_equal(hop_distances(nbrs), want)


def test_neighbour_max_ignores_padding():
    values = np.array([1.0, 5.0, 2.0])
    assert neighbour_max(values, neighbor_table(PATH3)).tolist() == [5.0, 2.0, 5.0]
    assert neighbour_max(values[:1], neighbor_table([()])).tolist() == [-np.inf]


def test_exchange_end_takes_the_latest_ready_within_the_rounds_hops():
    ready = np.array([0.0, 1.0, 3.0])
    hops = hop_distances(PATH3)
    # One round: each waits for itself and its neighbours, plus one message.
    assert exchange_end(ready, hops, 1, 0.5).tolist() == [1.5, 3.5, 3.5]
    # Two rounds reach the whole path.
    assert exchange_end(ready, hops, 2, 0.5).tolist() == [4.0, 4.0, 4.0]


def test_collective_end_is_the_latest_ready_plus_its_cost():
    assert collective_end(np.array([1.0, 4.0, 2.0]), 0.5).tolist() == [4.5, 4.5, 4.5]


def test_oneshot_end_is_one_allreduce_or_the_mixing_rounds():
    ready = np.array([0.0, 1.0, 3.0])
    hops = hop_distances(PATH3)
    reduce = allreduce_seconds(NET, 3, 10, "openmpi")
    assert oneshot_end("oneshot", ready, hops, 0, 10, NET, "openmpi").tolist() == [
        3 + reduce] * 3
    # One round of a 10-byte message (0.2 s): each waits for itself and its neighbours.
    assert oneshot_end("oneshot-graph", ready, hops, 1, 10, NET, "mpich").tolist() == [
        1.2, 3.2, 3.2]


def test_lead_activation():
    assert lead_activation(5, None) == -1
    assert lead_activation(5, 1) == 3  # version 4 of a neighbour is written by its activation 3
    assert lead_activation(1, 1) == -1


def test_bounded_delay_by_hand():
    """Two nodes, one 3x slower, lead 1: node 0 waits for node 1's version k - 1."""
    cost = np.array([[1.0] * 4, [3.0] * 4])
    start, end = bounded_delay(np.zeros(2), cost, neighbor_table([(1,), (0,)]), 1)
    # Node 0's activation k needs node 1's activation k-2 ended (version k-1 arrived).
    assert end[1].tolist() == [3, 6, 9, 12]
    assert start[0].tolist() == [0, 1, 3, 6]
    assert end[0].tolist() == [1, 2, 4, 7]


def test_bounded_delay_arrival_and_an_early_end():
    cost = np.array([[1.0] * 4, [3.0] * 4])
    pair = neighbor_table([(1,), (0,)])
    # Z arrives 0.5 s after its activation ends.
    start, _ = bounded_delay(np.zeros(2), cost, pair, 1, arrive=0.5)
    assert start[0].tolist() == [0, 1, 3.5, 6.5]
    # Node 1 ran one activation only (--stop): from then on it holds nobody back.
    start, _ = bounded_delay(np.zeros(2), cost, pair, 1, counts=np.array([4, 1]))
    assert start[0].tolist() == [0, 1, 3, 4]


def test_unbounded_delay_runs_each_node_on_its_own():
    cost = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    start, end = bounded_delay(np.array([1.0, 0.0]), cost, neighbor_table([(1,), (0,)]), None)
    assert end.tolist() == [[2, 4, 7], [4, 9, 15]]
    assert start.tolist() == [[1, 2, 4], [0, 4, 9]]


def _event_form(begin, cost, nbrs, max_lead):
    """Activations placed one at a time, in order of readiness, by activation_start."""
    m_nodes, k_acts = cost.shape
    ends = [[] for _ in range(m_nodes)]
    starts = [[] for _ in range(m_nodes)]
    prev = [float(b) for b in begin]
    progress = True
    while progress:
        progress = False
        for m in range(m_nodes):
            k = len(ends[m])
            if k == k_acts:
                continue
            t = activation_start(prev[m], k, max_lead, [ends[n] for n in nbrs[m]])
            if t is None:
                continue
            starts[m].append(t)
            ends[m].append(t + cost[m, k])
            prev[m] = ends[m][-1]
            progress = True
    return np.array(starts), np.array(ends)


@pytest.mark.parametrize("max_lead", [0, 1, 4])
def test_activation_start_gives_the_bounded_delay_times_exactly(max_lead):
    rng = np.random.default_rng(1)
    cost = rng.exponential(1.0, size=(6, 30))
    begin = rng.uniform(0, 2, size=6)
    start, end = bounded_delay(begin, cost, neighbor_table(RING6), max_lead)
    s2, e2 = _event_form(begin, cost, RING6, max_lead)
    assert np.array_equal(start, s2) and np.array_equal(end, e2)


def test_activation_start_unbounded_agrees_with_the_sums():
    rng = np.random.default_rng(2)
    cost = rng.exponential(1.0, size=(6, 30))
    begin = rng.uniform(0, 2, size=6)
    start, end = bounded_delay(begin, cost, neighbor_table(RING6), None)
    s2, e2 = _event_form(begin, cost, RING6, None)
    # A cumulative sum and a running sum round differently.
    assert np.allclose(start, s2, rtol=1e-13) and np.allclose(end, e2, rtol=1e-13)


def test_sync_times_by_hand_and_step_by_step():
    cost = np.array([[1.0, 1.0, 2.0], [2.0, 3.0, 1.0]])
    begin = np.array([0.5, 0.0])
    start, end = sync_times(begin, cost, 0.25)
    assert end[0].tolist() == [2.25, 5.5, 7.75] and (end[0] == end[1]).all()
    assert start.tolist() == [[0.5, 2.25, 5.5], [0.0, 2.25, 5.5]]
    rng = np.random.default_rng(3)
    cost = rng.exponential(1.0, size=(5, 40))
    begin = rng.uniform(0, 1, size=5)
    t, steps = begin, []
    for k in range(cost.shape[1]):
        t = collective_end(t + cost[:, k], 0.25)
        steps.append(t)
    assert np.allclose(sync_times(begin, cost, 0.25)[1], np.array(steps).T, rtol=1e-13)


def test_graph_times_are_exchange_rounds_after_each_compute():
    rng = np.random.default_rng(4)
    cost = rng.exponential(1.0, size=(6, 10))
    begin = rng.uniform(0, 1, size=6)
    hops = hop_distances(RING6)
    start, end = graph_times(begin, cost, hops, 2, 0.3)
    t = begin
    for k in range(cost.shape[1]):
        assert np.array_equal(start[:, k], t)
        t = exchange_end(t + cost[:, k], hops, 2, 0.3)
        assert np.array_equal(end[:, k], t)


def _model(mode, nbrs, auto=True, rounds=0):
    return TimingModel(mode=mode, neighbors=neighbor_table(nbrs), hops=hop_distances(nbrs),
                       network=NET, mix_rounds=rounds, auto_penalty=auto)


# Features, penalty and factor seconds of each of three nodes.
PHASES = np.array([[1.0, 0.5, 0.25], [2.0, 0.5, 0.25], [1.0, 1.0, 0.5]])
T0 = np.array([0.0, 1.0, 0.0])
PEN = 0.1 + PENALTY_BYTES / 100.0  # the penalty exchange's message: 0.34 s


def test_layer_begin_fixed_penalty_is_the_phases_in_a_row():
    begin = _model("sync", PATH3, auto=False).layer_begin(T0, PHASES, None)
    assert begin.tolist() == [1.75, 3.75, 2.5]


def test_layer_begin_sync_auto_waits_for_the_penalty_allreduce():
    begin = _model("sync", PATH3).layer_begin(T0, PHASES, None)
    reduce = allreduce_seconds(NET, 3, PENALTY_BYTES)
    ready = 3.5 + reduce
    assert begin.tolist() == pytest.approx([ready + 0.25, ready + 0.25, ready + 0.5])


def test_layer_begin_graph_auto_takes_the_mixing_rounds():
    # ready 1.5, 3.5, 2.0; two rounds span the path: 3.5 + 2 messages.
    begin = _model("sync-graph", PATH3, rounds=2).layer_begin(T0, PHASES, None)
    top = 3.5 + 2 * PEN
    assert begin.tolist() == pytest.approx([top + 0.25, top + 0.25, top + 0.5])


def test_layer_begin_async_auto_exchange_and_parity_wait():
    model = _model("async", PATH3)
    # One neighbour exchange: 1.5 -> max(1.5, 3.5), 3.5 -> 3.5, 2.0 -> 3.5.
    first = 3.5 + PEN
    assert model.layer_begin(T0, PHASES, None).tolist() == pytest.approx(
        [first + 0.25, first + 0.25, first + 0.5])
    # Node 1 left layer l-2 late: its neighbours wait for it, plus alpha.
    older = np.array([0.0, 10.0, 0.0])
    begin = model.layer_begin(T0, PHASES, older)
    assert begin.tolist() == pytest.approx([10.1 + 0.25, first + 0.25, 10.1 + 0.5])
    # Only async has parity slots.
    assert np.array_equal(_model("sync", PATH3).layer_begin(T0, PHASES, older),
                          _model("sync", PATH3).layer_begin(T0, PHASES, None))


def test_layer_begin_metric_exchange_replaces_the_penalty_exchange():
    # A layer solved in the Gram metric starts with the exchange of the packed Gram matrix
    # (the engines' metric), fixed penalty or not; its penalty needs no exchange of its own.
    big = 8 * 2080  # digits: P = 64, 64 * 65 / 2 numbers
    for auto in (True, False):
        sync = _model("sync", PATH3, auto=auto).layer_begin(T0, PHASES, None, big)
        ready = 3.5 + allreduce_seconds(NET, 3, big)
        assert sync.tolist() == pytest.approx([ready + 0.25, ready + 0.25, ready + 0.5])
        first = 3.5 + NET.message_seconds(big)
        asyn = _model("async", PATH3, auto=auto).layer_begin(T0, PHASES, None, big)
        assert asyn.tolist() == pytest.approx([first + 0.25, first + 0.25, first + 0.5])


def test_layer_begin_hood_metric_is_two_exchanges_in_a_row():
    # hood and hood-jacobi relay the metric (Grams to each centre, its metric back): their
    # layer 0 starts two message times after the neighbours' ready, each of half the bytes.
    big = 8 * 2080
    for mode in ("hood", "hood-jacobi"):
        assert lookup(mode).metric_exchanges == 2 and lookup("async").metric_exchanges == 1
        begin = _model(mode, PATH3).layer_begin(T0, PHASES, None, 2 * big)
        first = 3.5 + 2 * NET.message_seconds(big)
        assert begin.tolist() == pytest.approx([first + 0.25, first + 0.25, first + 0.5])
        # Two exchanges need every neighbour's neighbours ready: node 0 waits on node 2.
        late = _model(mode, PATH3).layer_begin(np.array([0.0, 0.0, 10.0]), PHASES, None, big)
        assert late[0] == pytest.approx(12.0 + 2 * NET.message_seconds(big / 2) + 0.25)
