"""The dedicated-core replay (dssfn_mpi.analysis: replay, network) on hand-built traces.

Every expected time below is worked out by hand from the rules in
docs/REPLAY.md; the network is alpha = 0.1 s with bandwidths chosen so that
a message costs round numbers.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from dssfn_mpi.analysis import replay
from dssfn_mpi.analysis.network import (
    NETWORKS,
    Network,
    allreduce_library,
    allreduce_seconds,
    parse_network,
)
from dssfn_mpi.analysis.replay import jitter_factors, parse_jitter, project, timeline
from dssfn_mpi.cli import main
from dssfn_mpi.errors import UserError
from dssfn_mpi.runlog import RunLog, append_run, write_runlog

# RunLog gains trace, trajectory and trace_attrs with the trace format (2026-11-23); until
# then a subclass with the same attributes stands in (replay only reads attributes).
if {"trace", "trajectory", "trace_attrs"} <= {f.name for f in dataclasses.fields(RunLog)}:
    TracedRunLog = RunLog
else:

    @dataclass
    class TracedRunLog(RunLog):  # type: ignore[no-redef]
        trace: dict = field(default_factory=dict)
        trajectory: dict = field(default_factory=dict)
        trace_attrs: dict = field(default_factory=dict)


#: A message of 10 bytes costs 0.1 + 10/100 = 0.2 s; the penalty's 24 bytes 0.1 + 0.24.
NET = Network("test", alpha=0.1, beta=100.0)
PAIR = [[1], [0]]
PATH3 = [[1, -1], [0, 2], [1, -1]]


def make_run(mode: str, cpu, neighbors=PAIR, *, phases=None, max_lead: int = -1,
             mix_rounds: int = -1, penalty="fixed", message_bytes: float = 10,
             trajectory: dict | None = None, total_seconds=None,
             puts_apart: bool = False) -> RunLog:
    """A run log of ``mode`` whose trace has compute ``cpu`` (L, M, K); ``puts_apart``: an
    async trace whose ``cpu`` leaves out the puts (``comm_start`` recorded)."""
    cpu = np.asarray(cpu, dtype=float)
    if cpu.ndim == 2:
        cpu = cpu[None]
    n_layers, m, k = cpu.shape
    phase_cpu = np.zeros((n_layers, m, 4)) if phases is None else np.asarray(phases, float)
    if mode != "async":
        phase_cpu[:, :, 2] = np.nan  # no parity wait outside async
    key = "gamma" if mode == "async" else "rho"
    config = {key: "auto" if penalty == "auto" else [1.0],
              "max_lead": None if max_lead < 0 else max_lead}
    total = np.full((n_layers, m), 1.0) if total_seconds is None else total_seconds
    return TracedRunLog(
        attrs={"mode": mode, "nodes": m, "layers_done": n_layers, "iters": k,
               "config": json.dumps(config)},
        layers={"total_seconds": np.asarray(total, dtype=float)},
        ranks={"neighbors": np.asarray(neighbors, dtype=np.int64)},
        source="hand.h5",
        trace={
            "start": np.zeros_like(cpu), "end": np.zeros_like(cpu), "cpu": cpu,
            "phase_cpu": phase_cpu,
            "message_bytes": np.full(n_layers, message_bytes, dtype=np.int64),
            "comm_start": np.zeros_like(cpu) if puts_apart else np.full_like(cpu, np.nan),
        },
        trace_attrs={"phases": ["features", "penalty", "parity_wait", "factor"],
                     "max_lead": max_lead, "mix_rounds": mix_rounds, "recorded": True,
                     "bytes_per_message": int(message_bytes)},
        trajectory=trajectory or {},
    )


def ends(run: RunLog, **kwargs) -> list[np.ndarray]:
    return [end for _layer, _start, end in timeline(run, NET, **kwargs)]


# --------------------------------------------------------------------------- async


def test_async_unbounded_runs_in_own_order():
    run = make_run("async", [[1, 2, 3], [1, 1, 1]])
    (layer, start, end), = timeline(run, NET)
    assert layer == 0
    np.testing.assert_allclose(end, [[1, 3, 6], [1, 2, 3]])
    np.testing.assert_allclose(start, [[0, 1, 3], [0, 1, 2]])
    proj = project(run, NET)
    assert proj.layers[0].seconds == pytest.approx(6)
    assert proj.layers[0].solve_seconds == pytest.approx(6)
    assert proj.total_seconds == pytest.approx(6)


def test_async_bounded_delay_waits_for_arrived_versions():
    # Rank 0 computes 1 s per activation, rank 1 3 s; a put arrives 0.2 s after it ends.
    # max_lead 1: activation k needs version k-1, i.e. the neighbour's activation k-2
    # ended + 0.2. Rank 0, k=2: 3 + 0.2; k=3: 6 + 0.2. Rank 1 never waits.
    run = make_run("async", [[1, 1, 1, 1], [3, 3, 3, 3]], max_lead=1)
    (end,) = ends(run)
    np.testing.assert_allclose(end, [[1, 2, 4.2, 7.2], [3, 6, 9, 12]])
    # max_lead 0: k needs the neighbour's activation k-1 (+0.2); rank 1 waits for
    # rank 0's versions only when they arrive after its own previous end (never here).
    run = make_run("async", [[1, 1, 1, 1], [3, 3, 3, 3]], max_lead=0)
    (end,) = ends(run)
    np.testing.assert_allclose(end, [[1, 4.2, 7.2, 10.2], [3, 6, 9, 12]])


def test_async_arrival_uses_bytes_over_bandwidth():
    # 50 bytes at 100 B/s: a version arrives 0.1 + 0.5 s after its activation ended.
    run = make_run("async", [[1, 1, 1], [3, 3, 3]], max_lead=0, message_bytes=50)
    (end,) = ends(run)
    np.testing.assert_allclose(end[0], [1, 4.6, 7.6])


def test_async_puts_apart_cost_the_origin_one_message():
    # cpu without the puts: each activation is its compute + 0.2 s (the put returns once Z
    # is in the neighbour's memory), and Z has arrived when the activation ends.
    # max_lead 1: rank 1 3.2 s each; rank 0 1.2 s, k=2 waits for rank 1's activation 0 end
    # (3.2), k=3 for its activation 1 end (6.4).
    run = make_run("async", [[1, 1, 1, 1], [3, 3, 3, 3]], max_lead=1, puts_apart=True)
    (end,) = ends(run)
    np.testing.assert_allclose(end, [[1.2, 2.4, 4.4, 7.6], [3.2, 6.4, 9.6, 12.8]])
    # unbounded: compute + put per activation, 50 bytes at 100 B/s: 0.1 + 0.5 s a put
    run = make_run("async", [[1, 1], [3, 3]], message_bytes=50, puts_apart=True)
    (layer, start, end), = timeline(run, NET)
    np.testing.assert_allclose(end, [[1.6, 3.2], [3.6, 7.2]])
    np.testing.assert_allclose(start, [[0, 1.6], [0, 3.6]])
    # the same trace without comm_start (an older log: cpu holds the run's own puts)
    old = make_run("async", [[1, 1], [3, 3]], message_bytes=50)
    np.testing.assert_allclose(ends(old)[0], [[1, 2], [3, 6]])


def test_async_unbounded_ignores_neighbours():
    run = make_run("async", [[1, 1, 1, 1], [3, 3, 3, 3]], max_lead=-1)
    (end,) = ends(run)
    np.testing.assert_allclose(end, [[1, 2, 3, 4], [3, 6, 9, 12]])


def test_async_parity_wait_then_factor():
    # Rank 1's layer 0 takes 5 s; rank 0 may start layer 2 only at 5 + alpha, then
    # factorises (0.5 s) and computes (1 s). Layers follow each other on each rank.
    cpu = [[[1], [5]], [[1], [1]], [[1], [1]]]
    phases = np.zeros((3, 2, 4))
    phases[2, 0, 3] = 0.5
    run = make_run("async", cpu, phases=phases)
    e0, e1, e2 = ends(run)
    np.testing.assert_allclose(e0[:, 0], [1, 5])
    np.testing.assert_allclose(e1[:, 0], [2, 6])
    np.testing.assert_allclose(e2[:, 0], [5.1 + 0.5 + 1, 7])
    proj = project(run, NET)
    assert [lp.seconds for lp in proj.layers] == pytest.approx([5, 1, 1])
    assert proj.total_seconds == pytest.approx(7)


@pytest.mark.parametrize("mode, exchange", [
    ("async", 0.34),        # one neighbour exchange: 0.1 + 24/100
    ("sync", 0.34),         # allreduce of 24 bytes over 2 ranks: one recursive-doubling step
    ("sync-graph", 0.68),   # two mixing rounds of 24 bytes
])
def test_auto_penalty_exchange(mode, exchange):
    # features 1 | 2 s, penalty compute 0.5 | 0 s, factor 0 | 0.25 s, one activation of 1 s.
    phases = np.zeros((1, 2, 4))
    phases[0, :, 0] = [1, 2]
    phases[0, :, 1] = [0.5, 0]
    phases[0, :, 3] = [0, 0.25]
    run = make_run(mode, [[1], [1]], phases=phases, penalty="auto", mix_rounds=2)
    (start, ) = [s for _l, s, _e in timeline(run, NET)]
    np.testing.assert_allclose(start[:, 0], [2 + exchange, 2 + exchange + 0.25])
    fixed = make_run(mode, [[1], [1]], phases=phases, penalty="fixed", mix_rounds=2)
    (start, ) = [s for _l, s, _e in timeline(fixed, NET)]
    np.testing.assert_allclose(start[:, 0], [1.5, 2.25])


# --------------------------------------------------------------------------- sync


def test_allreduce_model_values():
    net = Network("t", alpha=1.0, beta=1000.0)
    assert allreduce_seconds(net, 1, 16) == 0
    assert allreduce_seconds(net, 2, 16) == pytest.approx(1.016)           # lg 2 = 1 step
    assert allreduce_seconds(net, 4, 16) == pytest.approx(2 * 1.016)
    assert allreduce_seconds(net, 5, 16) == pytest.approx(4 * 1.016)       # 2 + 2 extra steps
    assert allreduce_seconds(net, 4, 2048) == pytest.approx(2 * 3.048)     # still short
    # Rabenseifner: 2 lg p alpha + 2 (p-1)/p n / beta
    assert allreduce_seconds(net, 4, 2049) == pytest.approx(4 + 2 * 0.75 * 2.049)
    assert allreduce_seconds(net, 8, 8000) == pytest.approx(6 + 2 * 7 / 8 * 8)
    assert allreduce_seconds(net, 6, 8000) == pytest.approx(4 + 2 * 0.75 * 8 + 2 * 9)


def test_sync_iteration_ends_at_slowest_plus_allreduce():
    # 4096 bytes (long): p = 2, 2 alpha + 2 (1/2) 4096/40960 = 0.2 + 0.1 = 0.3 s.
    net = Network("t", alpha=0.1, beta=40960.0)
    run = make_run("sync", [[1, 2], [3, 1]], message_bytes=4096)
    ((_l, start, end),) = timeline(run, net)
    np.testing.assert_allclose(end, [[3.3, 5.6], [3.3, 5.6]])
    np.testing.assert_allclose(start, [[0, 3.3], [0, 3.3]])


def test_allreduce_model_openmpi_libnbc():
    # Open MPI's MPI_Iallreduce (libnbc): binomial reduce + bcast, 2 ceil(log2 p) whole-buffer
    # steps, below 4 ranks or 64 KiB; Rabenseifner (as MPICH's long rule) from there on.
    net = Network("t", alpha=1.0, beta=1000.0)
    assert allreduce_seconds(net, 1, 16, "openmpi") == 0
    assert allreduce_seconds(net, 2, 16, "openmpi") == pytest.approx(2 * 1.016)
    assert allreduce_seconds(net, 3, 8000, "openmpi") == pytest.approx(4 * 9)
    assert allreduce_seconds(net, 2, 100_000, "openmpi") == pytest.approx(2 * 101)
    assert allreduce_seconds(net, 5, 65535, "openmpi") == pytest.approx(6 * 66.535)
    assert allreduce_seconds(net, 4, 65536, "openmpi") == pytest.approx(4 + 1.5 * 65.536)
    assert allreduce_seconds(net, 6, 65536, "openmpi") == pytest.approx(
        4 + 1.5 * 65.536 + 2 * 66.536)
    with pytest.raises(ValueError, match="library"):
        allreduce_seconds(net, 2, 16, "lam")


def test_allreduce_library_from_the_run_log():
    assert allreduce_library("Open MPI v5.0.11, package: Open MPI ...") == "openmpi"
    for text in ("MPICH Version: 4.2.0", "Intel(R) MPI Library 2021.10", ""):
        assert allreduce_library(text) == "mpich"


def test_sync_replay_follows_the_runs_library():
    # 4096 bytes, p = 2, alpha 0.1, n/beta 0.1: MPICH 2 alpha + n/beta = 0.3 s per
    # iteration; Open MPI (binomial) 2 (alpha + n/beta) = 0.4 s.
    net = Network("t", alpha=0.1, beta=40960.0)
    run = make_run("sync", [[1, 2], [3, 1]], message_bytes=4096)
    run.attrs["mpi_library"] = "Open MPI v5.0.11"
    ((_l, _start, end),) = timeline(run, net)
    np.testing.assert_allclose(end, [[3.4, 5.8], [3.4, 5.8]])
    run.attrs["mpi_library"] = "MPICH Version: 4.2.0"
    ((_l, _start, end),) = timeline(run, net)
    np.testing.assert_allclose(end, [[3.3, 5.6], [3.3, 5.6]])


@pytest.mark.parametrize("rounds, expected", [
    # Round by round on the path 0-1-2 (message 0.2 s). Iteration 0 computes to 1, 2, 4;
    # R = 1: max over {0,1}, {0,1,2}, {1,2} + 0.2 -> 2.2, 4.2, 4.2; iteration 1 computes
    # to 3.2, 5.2, 5.2 -> 5.4 everywhere.
    (1, [[2.2, 5.4], [4.2, 5.4], [4.2, 5.4]]),
    # R = 2: second round 4.4 everywhere; iteration 1: 5.4 + 0.4.
    (2, [[4.4, 5.8], [4.4, 5.8], [4.4, 5.8]]),
])
def test_sync_graph_rounds_on_a_path(rounds, expected):
    run = make_run("sync-graph", [[1, 1], [2, 1], [4, 1]], PATH3, mix_rounds=rounds)
    (end,) = ends(run)
    np.testing.assert_allclose(end, expected)


# --------------------------------------------------------------------------- one-shot


def test_oneshot_exchanges_then_solves():
    # Packing (factor) 0.5 | 1 s, penalty exchange none even with rho auto in the config;
    # the allreduce of 4096 bytes over 2 ranks (MPICH, long: 2 alpha + n/beta = 0.3 s)
    # starts when the last rank packed (1 s); then each rank's solve, 2 | 0.5 s.
    net = Network("t", alpha=0.1, beta=40960.0)
    phases = np.zeros((1, 2, 4))
    phases[0, :, 3] = [0.5, 1]
    run = make_run("oneshot", [[2], [0.5]], phases=phases, penalty="auto", message_bytes=4096)
    ((_l, start, end),) = timeline(run, net)
    np.testing.assert_allclose(start, [[0.5], [1]])
    np.testing.assert_allclose(end, [[3.3], [1.8]])
    assert project(run, net).total_seconds == pytest.approx(3.3)


def test_oneshot_graph_mixes_its_rounds_on_a_path():
    # Ready at 1, 2, 4 on the path 0-1-2; two rounds of 0.2 s: 4.4 on every rank (all within
    # two hops of rank 2), then the solves of 1, 1, 0 s.
    run = make_run("oneshot-graph", [[1], [1], [0]], PATH3, mix_rounds=2,
                   phases=np.array([[[1, 0, 0, 0], [2, 0, 0, 0], [4, 0, 0, 0]]], float))
    (end,) = ends(run)
    np.testing.assert_allclose(end, [[5.4], [5.4], [4.4]])
    with pytest.raises(UserError, match="oneshot-graph trace without mix_rounds"):
        project(make_run("oneshot-graph", [[1], [1]], mix_rounds=-1), NET)


def test_sync_graph_needs_its_rounds():
    run = make_run("sync-graph", [[1], [1]], mix_rounds=-1)
    with pytest.raises(UserError, match="mix_rounds"):
        project(run, NET)


# --------------------------------------------------------------------------- what-ifs


def test_slow_rank_multiplies_its_activations():
    # features 1 s each (not slowed, as under train --slow), then 1 s activations x 3 on rank 1
    phases = np.zeros((1, 2, 4))
    phases[0, :, 0] = 1.0
    run = make_run("async", [[1, 1], [1, 1]], phases=phases)
    (end,) = ends(run, slow={1: 3.0})
    np.testing.assert_allclose(end, [[2, 3], [4, 7]])
    assert project(run, NET, slow={1: 3.0}).total_seconds == pytest.approx(7)
    with pytest.raises(UserError, match="ranks 0..1"):
        project(run, NET, slow={2: 2.0})


def test_a_run_made_with_slow_keeps_its_straggler():
    # train --slow 1:3 sleeps 2 x each activation: thread CPU time does not show it.
    run = make_run("async", [[1, 1], [1, 1]])
    run.attrs["config"] = json.dumps({**run.config, "slow": {"1": 3.0}})
    (end,) = ends(run)
    np.testing.assert_allclose(end, [[1, 2], [3, 6]])
    (end,) = ends(run, slow={1: 2.0})  # and replay's own factor multiplies it
    np.testing.assert_allclose(end[1], [6, 12])


def test_jitter_is_seeded_and_has_the_documented_mean():
    shape = (4, 50, 500)
    a = jitter_factors(("exp", 0.5), shape, seed=3)
    assert np.array_equal(a, jitter_factors(("exp", 0.5), shape, seed=3))
    assert not np.array_equal(a, jitter_factors(("exp", 0.5), shape, seed=4))
    assert a.min() >= 1.0
    assert a.mean() == pytest.approx(1.5, rel=0.01)
    b = jitter_factors(("lognormal", 0.5), shape, seed=3)
    assert np.median(b) == pytest.approx(1.0, rel=0.01)
    assert b.mean() == pytest.approx(np.exp(0.125), rel=0.01)
    assert np.array_equal(jitter_factors(("exp", 0.0), shape, 0), np.ones(shape))
    run = make_run("async", np.ones((2, 2, 20)))
    one = project(run, NET, jitter=("exp", 1.0), seed=7).to_json()
    assert one == project(run, NET, jitter=("exp", 1.0), seed=7).to_json()
    assert one != project(run, NET, jitter=("exp", 1.0), seed=8).to_json()


def test_jitter_costs_sync_the_slowest_of_m_and_async_its_mean():
    # M = 20, 1 s per iteration, exp:1: sync pays E[max of 20] = 1 + H_20 = 4.60 s per
    # iteration (+ a tiny allreduce); async without a bound pays the mean, 2 s per
    # activation, up to the slowest rank's sum: 2 + 1.87 sqrt(200) / 200 = 2.13 at most.
    m, k = 20, 200
    ring = [[(r - 1) % m, (r + 1) % m] for r in range(m)]
    net = NETWORKS["ib"]
    sync = project(make_run("sync", np.ones((m, k)), ring), net, jitter=("exp", 1.0))
    free = project(make_run("async", np.ones((m, k)), ring), net, jitter=("exp", 1.0))
    harmonic = sum(1 / i for i in range(1, m + 1))
    assert sync.total_seconds / k == pytest.approx(1 + harmonic, rel=0.05)
    assert 2.0 < free.total_seconds / k < 2.2


def test_big_run_projects_quickly():
    m, k, n_layers = 20, 200, 20
    ring = [[(r - 1) % m, (r + 1) % m] for r in range(m)]
    cpu = np.full((n_layers, m, k), 1e-3)
    for mode in ("async", "sync", "sync-graph"):
        run = make_run(mode, cpu, ring, max_lead=4, mix_rounds=229, penalty="auto")
        t = time.perf_counter()
        project(run, NETWORKS["shm"], jitter=("exp", 0.5))
        assert time.perf_counter() - t < 3.0, mode  # ~0.1 s alone; generous under load


# --------------------------------------------------------------------------- accuracy


def test_time_to_eps_from_the_solve_start():
    # features 1 s each, so the solve starts at 1; rank 0 ends activations at 2, 3, 4, 5,
    # rank 1 at 3, 5, 7, 9. Snapshots after 2 and 4 activations: rank 0 at 3 and 5,
    # rank 1 at 5 and 9.
    phases = np.zeros((1, 2, 4))
    phases[0, :, 0] = 1.0
    traj = {"activation": np.array([2, 4]),
            "rel_distance": np.array([[[0.5, 0.001], [0.005, 0.002]]])}
    run = make_run("async", [[1, 1, 1, 1], [2, 2, 2, 2]], phases=phases, trajectory=traj)
    assert project(run, NET, eps=1e-2).layers[0].time_to_eps == pytest.approx(5 - 1)
    assert project(run, NET, eps=3e-3).layers[0].time_to_eps == pytest.approx(9 - 1)
    assert project(run, NET, eps=1e-3).layers[0].time_to_eps is None  # rank 1 never
    assert project(run, NET).layers[0].solve_seconds == pytest.approx(9 - 1)
    traj["rel_distance"] = np.full((1, 2, 2), np.nan)  # run without the check
    assert project(run, NET).layers[0].time_to_eps is None
    assert project(make_run("async", [[1], [1]]), NET).layers[0].time_to_eps is None


def test_json_has_exactly_the_documented_keys():
    run = make_run("async", [[[1], [2]], [[1], [1]]], total_seconds=[[3.0, 4.0], [1.0, np.nan]])
    obj = json.loads(json.dumps(project(run, NET).to_json()))
    assert set(obj) == {"network", "total_seconds", "measured_seconds", "layers"}
    assert obj["network"] == {"alpha": 0.1, "beta": 100.0}
    assert obj["measured_seconds"] == pytest.approx(4.0 + 1.0)
    assert obj["total_seconds"] == pytest.approx(3.0)
    assert [set(layer) for layer in obj["layers"]] == [
        {"layer", "seconds", "measured_seconds", "solve_seconds", "time_to_eps"}] * 2
    assert [layer["layer"] for layer in obj["layers"]] == [0, 1]
    assert obj["layers"][0]["time_to_eps"] is None


def test_layers_before_a_resume_are_left_out():
    cpu = np.array([[[np.nan], [np.nan]], [[1.0], [2.0]]])
    proj = project(make_run("async", cpu), NET)
    assert [lp.layer for lp in proj.layers] == [1]
    assert proj.total_seconds == pytest.approx(2)


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize("text, alpha, beta", [
    ("shm", 2.8e-6, 55e9), ("ib", 1.2e-6, 24e9), ("eth10", 20e-6, 1.18e9),
    ("alpha=1e-6,beta=2e9", 1e-6, 2e9), ("beta=2e9,alpha=0", 0.0, 2e9),
])
def test_parse_network(text, alpha, beta):
    net = parse_network(text)
    assert (net.alpha, net.beta) == (alpha, beta)


@pytest.mark.parametrize("text", ["", "myrinet", "alpha=1e-6", "alpha=x,beta=1",
                                  "alpha=1,beta=0", "alpha=-1,beta=1", "alpha=1,beta=2,gamma=3"])
def test_bad_network(text):
    with pytest.raises(UserError, match="--network"):
        parse_network(text)


@pytest.mark.parametrize("text", ["exp", "exp:-1", "gauss:1", "lognormal:x", "exp:nan"])
def test_bad_jitter(text):
    with pytest.raises(UserError, match="--jitter"):
        parse_jitter(text)


# --------------------------------------------------------------------------- command line


def _one_error_line(capsys, *fragments: str) -> None:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dssfn-mpi: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _plain_runlog(path, mode: str = "async") -> None:
    write_runlog(path, {"mode": mode, "nodes": 2, "iters": 3},
                 {"total_seconds": np.ones((1, 2))}, ranks={"neighbors": PAIR})


@pytest.mark.parametrize("args, fragments", [
    (["--network", "warp"], ["--network 'warp'"]),
    (["--jitter", "exp:-2"], ["--jitter"]),
    (["--slow", "1"], ["--slow"]),
    (["--eps", "0"], ["--eps"]),
    ([], ["without a trace", "rerun it"]),
])
def test_cli_errors_are_one_line(tmp_path, capsys, args, fragments):
    path = tmp_path / "run.h5"
    _plain_runlog(path)
    try:
        code = main(["replay", str(path), *args])
    except SystemExit as exc:  # argparse's range check of --eps
        code = exc.code
    assert code == 2
    _one_error_line(capsys, *fragments)


def test_cli_central_and_missing_file(tmp_path, capsys):
    path = tmp_path / "central.h5"
    _plain_runlog(path, mode="central")
    assert main(["replay", str(path)]) == 2
    _one_error_line(capsys, "central")
    assert main(["replay", str(tmp_path / "nope.h5")]) == 2
    _one_error_line(capsys, "does not exist")
    assert main(["report", str(path), "--network", "shm"]) == 2
    _one_error_line(capsys, "central")  # nothing of the report printed before the error


def test_cli_sweep_needs_a_run_name(tmp_path, capsys):
    path = tmp_path / "sweep.h5"
    for name in ("a", "b"):
        append_run(path, name, {"mode": "async", "nodes": 2}, {"total_seconds": np.ones((1, 2))})
    assert main(["replay", str(path)]) == 2
    _one_error_line(capsys, "--run", "a, b")
    assert main(["replay", str(path), "--run", "c"]) == 2
    _one_error_line(capsys, "'c'", "a, b")
    assert main(["replay", str(path), "--run", "a"]) == 2
    _one_error_line(capsys, "without a trace")
    assert main(["report", str(path), "--network", "ib"]) == 0
    out, _err = capsys.readouterr()
    assert out.count("no projection:") == 2


def test_cli_prints_one_json_object_or_a_table(monkeypatch, capsys):
    run = make_run("sync", [[1, 2], [3, 1]])
    monkeypatch.setattr(replay, "load_run", lambda path, name=None: run)
    assert main(["replay", "x.h5", "--network", "alpha=0.1,beta=100", "--json",
                 "--slow", "0:2", "--jitter", "lognormal:0.3", "--jitter-seed", "5"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    obj = json.loads(out)  # exactly one object, nothing else on stdout
    expected = project(run, NET, slow={0: 2.0}, jitter=("lognormal", 0.3), seed=5).to_json()
    assert obj == expected
    assert main(["replay", "x.h5", "--network", "ib"]) == 0
    out, _err = capsys.readouterr()
    assert "network ib" in out and "total: measured" in out
    assert len(out.strip().splitlines()) == 3 + 1 + 1  # header 2, column names, layer, total
