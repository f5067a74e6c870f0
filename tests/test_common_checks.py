"""The checks every registered algorithm gets, as ``check_estimator`` runs over estimators.

Parametrised over the registry (:data:`dssfn_mpi.algorithms.ALGORITHMS`), with the test
tree's plug-in (``tests/plugins/relaxed.py``) registered for the module: a new algorithm is
checked by registering it, with no edit here. Each decentralized algorithm runs once live
(``mpirun -n 4``, through ``tests/plugins/launch.py`` so the plug-in is known) and then:

- live and simulated, every node of every layer reaches the exact centralized solution O*
  (the run log's ``rel_distance``), where the algorithm is exact (:attr:`Algorithm.exact`);
- re-executed by the simulator (``--schedule``), the same iterates node by node, the same
  ``activations``, ``puts`` and ``bytes_sent``, and with the run's trace as the speed model
  the replay's times;
- it is listed in ``--help``, and bad options are refused in one line, exit status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from mpitools import exit_status, run_jobs

from dssfn_mpi.algorithms import ALGORITHMS, register
from dssfn_mpi.analysis.replay import load_run, parse_network, project
from dssfn_mpi.cli import main
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.ssfn.modelio import load_model

PLUGINS = Path(__file__).resolve().parent / "plugins"
sys.path.insert(0, str(PLUGINS))
import relaxed  # noqa: E402  (the plug-in, registered while this module runs)

sys.path.remove(str(PLUGINS))

#: Small enough to take seconds, long enough for every exact algorithm to reach 1e-6: with
#: the norm bound active at both layers (5 here, 2Q = 20 by default) the slowest, hood's
#: one-sided form, is within 1e-7 of O* after about 270 activations simulated (every other
#: one after 180 or fewer) and within 1e-10 after 400; mixing rounds enough for an average
#: exact to rounding on this ring.
ITERS = 400
SETTINGS = ["--dataset", "digits", "--layers", "1", "--hidden", "60", "--iters", str(ITERS),
            "--seed", "2", "--degree", "2", "--mix-rounds", "40", "--norm-bound", "5",
            "--quiet"]
EXACT = 1e-6
register(relaxed.ALGORITHM)
CASES = [a for a in ALGORITHMS if a.decentralized]
ALGORITHMS.remove(relaxed.ALGORITHM)  # until the module's fixture registers it
IDS = [a.name if a.update in (None, "edge") else f"{a.name}/{a.update}" for a in CASES]

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(600)]


def _args(alg) -> list[str]:
    return ["--mode", alg.name, *(["--update", alg.update] if alg.update else [])]


@pytest.fixture(scope="module", autouse=True)
def plugin():
    """The plug-in stays registered for this module alone."""
    register(relaxed.ALGORITHM)
    yield
    if relaxed.ALGORITHM in ALGORITHMS:
        ALGORITHMS.remove(relaxed.ALGORITHM)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Each algorithm's live run log and saved model: every run in one ``mpirun -n 4`` job
    (``launch.py``'s ``---``), so the ranks start once."""
    root, out, commands = tmp_path_factory.mktemp("common"), {}, []
    for alg, name in zip(CASES, IDS):
        stem = name.replace("/", "-")
        run, model = root / f"{stem}.h5", root / f"{stem}-model.h5"
        commands.append(["train", *_args(alg), *SETTINGS, "--out", str(run),
                         "--save-model", str(model)])
        out[name] = (run, model)
    res = run_jobs(4, commands, timeout=500)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


def test_the_plugin_is_among_the_checked():
    assert "relaxed-sync" in IDS and len(IDS) == len(set(IDS))


@pytest.mark.parametrize("alg", CASES, ids=IDS)
def test_live_reaches_the_exact_solution_at_every_layer(live, alg):
    log = read_runlog(live[IDS[CASES.index(alg)]][0])
    rel = log.layers["rel_distance"]
    assert rel.shape == (2, 4) and np.isfinite(rel).all()
    if alg.exact:
        assert rel.max() <= EXACT, rel


@pytest.mark.parametrize("alg", CASES, ids=IDS)
def test_simulated_reaches_the_exact_solution_at_every_layer(tmp_path, alg):
    out = tmp_path / "sim.h5"
    assert main(["simulate", *_args(alg), "--nodes", "4", *SETTINGS, "--out", str(out)]) == 0
    rel = read_runlog(out).layers["rel_distance"]
    assert rel.shape == (2, 4) and np.isfinite(rel).all()
    if alg.exact:
        assert rel.max() <= EXACT, rel


@pytest.mark.parametrize("alg", CASES, ids=IDS)
def test_the_simulator_re_executes_the_live_run(live, tmp_path, alg):
    """``--schedule``: the same iterates node by node, the same counts and bytes; with the
    run's trace as the speed model, the replay's layer times on the same network (the rules
    are the same: 5 % is the requirement)."""
    run, model = live[IDS[CASES.index(alg)]]
    sim, sim_model = tmp_path / "sim.h5", tmp_path / "sim-model.h5"
    assert main(["simulate", "--schedule", str(run), "--speed", f"trace:{run}",
                 "--network", "eth10", "--out", str(sim), "--save-model", str(sim_model),
                 "--quiet"]) == 0
    a, b = load_model(model), load_model(sim_model)
    assert len(b.nodes) == 4 and len(b.nodes[0]) == 2
    worst = max(float(np.linalg.norm(x - y) / np.linalg.norm(x))
                for na, nb in zip(a.nodes, b.nodes) for x, y in zip(na, nb))
    assert worst <= 1e-8, worst  # an allreduce and the simulator sum in different orders
    la, lb = read_runlog(run).layers, read_runlog(sim).layers
    for key in ("activations", "puts", "bytes_sent"):
        assert np.array_equal(la[key], lb[key]), key
    assert (la["bytes_sent"] > 0).all()
    proj = project(load_run(run), parse_network("eth10"))
    ends = read_runlog(sim).extra["sim_layer_end"].max(axis=1)
    layers = np.diff(np.concatenate([[0.0], ends]))
    assert np.allclose(layers, [lp.seconds for lp in proj.layers], rtol=0.05, atol=0)
    assert ends[-1] == pytest.approx(proj.total_seconds, rel=0.05)


@pytest.mark.parametrize("command", ["train", "simulate"])
def test_every_algorithm_is_listed_in_help(capsys, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps to the terminal's width
    assert exit_status([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert all(alg.name in text for alg in CASES)


@pytest.mark.parametrize("alg", CASES, ids=IDS)
def test_bad_options_are_refused_in_one_line(capsys, tmp_path, alg):
    bad = [["--eta", "2.5"], ["--iters", "0"],
           ["--relax", "2.5" if alg.relaxes else "1.3"],
           ["--max-lead", "3"] if not alg.one_sided else ["--max-lead", "-2"]]
    for extra in bad:
        out = tmp_path / "never.h5"
        code = exit_status(["simulate", *_args(alg), "--nodes", "4", *SETTINGS, *extra,
                        "--out", str(out)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("dssfn-mpi: error"), \
            (extra, err)
        assert not out.exists()


@pytest.mark.parametrize("alg", [a for a in CASES if a.one_sided],
                         ids=[i for a, i in zip(CASES, IDS) if a.one_sided])
def test_event_loop_with_the_trace_gives_the_replay_times(live, tmp_path, alg):
    """Not the schedule: the simulator's own reads, timed by the one-sided run's trace."""
    run, _ = live[IDS[CASES.index(alg)]]
    out = tmp_path / "sim.h5"
    assert main(["simulate", *_args(alg), *SETTINGS, "--nodes", "4", "--speed",
                 f"trace:{run}", "--out", str(out)]) == 0
    log = read_runlog(out)
    proj = project(load_run(run), parse_network("shm"))
    assert log.attrs["sim_total_seconds"] == pytest.approx(proj.total_seconds, rel=1e-9)
    assert (log.layers["activations"] == ITERS).all()
