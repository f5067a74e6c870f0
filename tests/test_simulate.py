"""``dssfn-mpi simulate``: the event loop's rules on small hand-checkable cases.

Every registered algorithm's simulation against its live run (the same iterates, bytes
and the replay's times) is in tests/test_common_checks.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dssfn_mpi.algorithms import kernels
from dssfn_mpi.algorithms.stoprule import reason_code
from dssfn_mpi.analysis.replay import parse_network
from dssfn_mpi.cli import main
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.sim.speed import SpeedModel, parse_classes
from dssfn_mpi.ssfn.gramstats import stats_bytes, stats_rounds

ITERATIVE = ("async", "sync", "sync-graph")
MODES = (*ITERATIVE, "oneshot", "oneshot-graph")


@pytest.mark.parametrize("mode, bound", [("oneshot", 1e-10), ("oneshot-graph", 1e-8)])
def test_simulated_oneshot_is_the_exact_solution(tmp_path, mode, bound):
    # Five nodes on a ring, label-skewed shards: the averaged statistics' exact solve is O*
    # (the graph form within its mixing accuracy), at every layer, bound active or not.
    out = tmp_path / "o.h5"
    assert main(["simulate", "--dataset", "digits", "--hidden", "100", "--layers", "2",
                 "--degree", "2", "--nodes", "5", "--partition", "dirichlet:0.5",
                 "--mode", mode, "--network", "eth10", "--out", str(out), "--quiet"]) == 0
    log = read_runlog(out)
    assert log.layers["rel_distance"].max() <= bound, log.layers["rel_distance"]
    assert (log.layers["lambda_star"][1:] > 0).all()
    assert (log.layers["activations"] == 1).all() and (log.layers["stop_reason"] == -1).all()
    d = [64, 100, 100]  # digits: P = 64
    rounds = log.layers["mix_rounds"][0, 0]
    sends = 1 if mode == "oneshot" else 2 * rounds
    assert mode == "oneshot" or rounds == stats_rounds(make_topology("ring", 5), 1e-10)
    for layer in range(3):
        assert (log.layers["bytes_sent"][layer] == sends * stats_bytes(d[layer], 10)).all()


@pytest.mark.parametrize("mode", ITERATIVE)
def test_simulated_metric_input_layer(tmp_path, mode):
    # The input layer in the Gram metric (the default), as the engines solve it: the exact
    # solution (label-skewed shards), and on digits' singular input Gram a few tens of
    # iterations to 1e-2 where the scalar penalty is capped.
    out = tmp_path / "m.h5"
    common = ["--dataset", "digits", "--layers", "0", "--degree", "2", "--nodes", "4",
              "--speed", "const:1e-3", "--quiet", "--no-eval"]
    assert main(["simulate", *common, "--mode", mode, "--iters", "150", "--partition",
                 "dirichlet:0.5", "--out", str(out)]) == 0
    log = read_runlog(out)
    exact = 1e-4 if mode == "sync-graph" else 1e-6  # sync-graph: its mixing's accuracy
    assert log.layers["rel_distance"].max() <= exact, log.layers["rel_distance"]
    assert (log.layers["metric_bytes"] == 8 * 64 * 65 // 2).all()
    counts = {}
    for metric in ("gram", "identity"):
        path = tmp_path / f"{metric}.h5"
        assert main(["simulate", *common, "--mode", mode, "--metric", metric, "--iters",
                     "150", "--stop", "eps:1e-2", "--out", str(path)]) == 0
        counts[metric] = read_runlog(path).layers["activations"].max()
    assert counts["gram"] <= 60 and counts["identity"] == 150, counts


@pytest.mark.parametrize("mode,graph,cap", [
    ("sync", ["--dataset", "digits", "--nodes", "256", "--degree", "8"], 120),
    ("hood-jacobi", ["--dataset", "satimage", "--nodes", "64", "--topology", "ring"], 300)])
def test_metric_penalty_keeps_the_input_layer_short_at_scale(tmp_path, mode, graph, cap):
    # Layer 0's metric penalty grows with the width over the samples per node (digits at
    # M = 256: 4.7 samples for 64 inputs; 95 iterations, 158 at M = 20's rho = 2) and, in
    # neighbourhood consensus, with the graph's factor (satimage on a ring of 64: 148 rounds,
    # 950 without it): every node within 1e-2 of O* before the cap.
    out = tmp_path / "m.h5"
    assert main(["simulate", *graph, "--mode", mode, "--layers", "0", "--stop", "eps:1e-2",
                 "--iters", str(cap), "--quiet", "--no-eval", "--out", str(out)]) == 0
    log = read_runlog(out)
    assert log.layers["rel_distance"].max() <= 1e-2
    assert (log.layers["stop_reason"] == reason_code("eps")).all()
    assert log.layers["activations"].max() < cap


def test_stop_eps_ends_layers_early_and_records_the_reason(tmp_path):
    out = tmp_path / "eps.h5"
    args = ["simulate", "--dataset", "digits", "--hidden", "100", "--layers", "1",
            "--iters", "1000", "--degree", "2", "--nodes", "6", "--speed", "const:1e-3",
            "--stop", "eps:1e-2", "--quiet"]
    for mode in ITERATIVE:
        assert main([*args, "--mode", mode, "--out", str(out), "--overwrite"]) == 0
        log = read_runlog(out)
        reason, acts = log.layers["stop_reason"][1], log.layers["activations"][1]
        assert (reason == reason_code("eps")).all(), mode
        assert (acts < 1000).all()
        # Every node was within E at one moment; the final O can have moved a little.
        assert log.layers["rel_distance"][1].max() < 2e-2
        assert log.attrs["compiled_kernels"] == kernels.compiled_status()
        if mode != "async":  # lockstep: flags of k ride in k+1, which is then dropped
            assert (acts == acts[0]).all()


def test_slow_means_slower_activations_as_live_and_classes_slow_everything():
    speed = SpeedModel.build("measured", 4, 1, 1, {1: 5.0}, "0.5:2,0.5:1", None, 0)
    ones = np.ones((4, 3))
    # --slow 1:5 (train's straggler sleeps after each activation): activations only.
    assert speed.activations(0, 0, np.ones(4)).tolist() == [2.0, 10.0, 1.0, 1.0]
    # --speeds classes are slower hardware: the layer-start phases too.
    assert speed.phases(0, ones)[:, 0].tolist() == [2.0, 2.0, 1.0, 1.0]


def test_straggler_and_classes_slow_the_simulated_time(tmp_path):
    base = ["simulate", "--dataset", "digits", "--hidden", "60", "--layers", "0",
            "--iters", "40", "--degree", "2", "--nodes", "4", "--speed", "const:1e-3",
            "--mode", "async", "--quiet", "--overwrite"]
    totals = []
    for extra in ([], ["--slow", "1:5"], ["--speeds", "0.5:2,0.5:1"]):
        out = tmp_path / "s.h5"
        assert main([*base, *extra, "--out", str(out)]) == 0
        totals.append(read_runlog(out).attrs["sim_total_seconds"])
    # const: the layer-start phases cost nothing; the Gram metric's exchange is one
    # message of the packed 64 x 64 Gram matrix (64 * 65 / 2 doubles; the metric's penalty
    # needs none), then 40 activations of compute and a put of Q x 64 doubles each, the
    # slowest node setting the pace (max lead 4 ties everyone to it).
    shm = parse_network("shm")
    put, start = shm.message_seconds(10 * 64 * 8), shm.message_seconds(8 * 64 * 65 // 2)
    assert totals[0] == pytest.approx(start + 40 * (1e-3 + put), rel=1e-9)
    assert totals[1] == pytest.approx(start + 40 * (5e-3 + put), rel=1e-9)
    assert totals[2] == pytest.approx(start + 40 * (2e-3 + put), rel=1e-9)


def test_classes_are_assigned_in_node_order():
    assert parse_classes("0.25:4,0.75:1", 8).tolist() == [4, 4, 1, 1, 1, 1, 1, 1]


@pytest.mark.parametrize("args, message", [
    ([], "needs --nodes"),
    (["--nodes", "5", "--degree", "3"], "even number of nodes"),
    (["--nodes", "4", "--speed", "trace:/nonexistent.h5"], "no such run log"),
    (["--nodes", "4", "--speed", "fast"], "--speed 'fast'"),
    (["--nodes", "4", "--speeds", "0.5:2"], "sum to 0.5"),
    (["--nodes", "4", "--slow", "7:2"], "only 4 nodes"),
    (["--nodes", "4", "--mode", "central"], "simulate runs"),
    (["--schedule", "/nonexistent.h5"], "no such run log"),
    (["--nodes", "4", "--mode", "lockstep", "--max-lead", "0"],
     "--max-lead applies to the one-sided modes (async, hood), not --mode lockstep"),
    (["--nodes", "5", "--topology", "random-regular", "--degree", "3"],
     "n_nodes*degree even (got 5*3=15)"),
    (["--nodes", "6", "--topology", "random-regular", "--degree", "6"],
     "degree 6 is out of range for random-regular on 6 nodes"),
    (["--nodes", "8", "--topology", "exponential", "--degree", "4"],
     "an exponential graph on 8 nodes has degree 5, not 4"),
])
def test_user_errors_are_one_line(capsys, tmp_path, args, message):
    out = tmp_path / "run.h5"
    assert main(["simulate", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dssfn-mpi: error:") and message in err[0]
    assert list(tmp_path.iterdir()) == []


def test_one_node_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--nodes", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--nodes" in err[0] and ">= 2" in err[0], err


def test_report_reads_a_simulated_run(tmp_path, capsys):
    out = tmp_path / "r.h5"
    assert main(["simulate", "--dataset", "digits", "--hidden", "60", "--layers", "1",
                 "--iters", "10", "--nodes", "4", "--degree", "2", "--out", str(out),
                 "--speed", "const:1e-3", "--quiet"]) == 0
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "simulated" in text
    assert json.loads(read_runlog(out).attrs["config"])["iters"] == 10


def test_an_exponential_run_records_and_prints_its_graph(tmp_path, capsys):
    out = tmp_path / "exp.h5"
    assert main(["simulate", "--dataset", "digits", "--nodes", "8", "--topology", "exponential",
                 "--layers", "1", "--iters", "5", "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == ("simulating 8 nodes, async: graph exponential: degree 5, diameter 2, "
                     "spectral gap 0.6667")
    attrs = read_runlog(out).attrs
    assert (attrs["topology"], attrs["degree"], attrs["graph_min_degree"]) == ("exponential", 5, 5)
    assert attrs["graph_diameter"] == 2
    # against the dense spectrum of the Metropolis matrix (its last eigenvalue the consensus 1)
    W = make_topology("exponential", 8).metropolis_weights()
    assert attrs["graph_spectral_gap"] == pytest.approx(
        1 - np.abs(np.linalg.eigvalsh(W)[:-1]).max(), abs=1e-12)
    assert attrs["graph_algebraic_connectivity"] == pytest.approx(4.0)
    assert json.loads(attrs["config"])["topology"] == "exponential"
