"""``--mode lockstep``: async's edge update in Jacobi rounds, live and simulated (and
``hood-lockstep``, the neighbourhood step on the same driver).

Every node activates once per round on exactly its neighbours' messages of the previous
round, so the iterates do not depend on speeds: the simulated lockstep is the simulated
async run with ``--max-lead 0 --speed const`` (the schedule under which async is Jacobi),
the live run is the simulated one, and both reach the exact centralized ``O*`` (the run
log's ``rel_distance``) at every layer, bound active or not, in the Gram metric at layer 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from modeltools import simulate_saved, worst_gap
from mpitools import train_runs

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.algorithms.edge import EdgeADMM
from dssfn_mpi.algorithms.stoprule import reason_code
from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.config import TrainConfig
from dssfn_mpi.drivers import LOCKSTEP
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.sim.layerloop import SimOptions, simulate
from dssfn_mpi.sim.speed import SpeedModel

# Label-skewed shards on a ring (diameter 2 at 4 and 5 nodes: the votes take a round to
# spread); the bound is inactive at layer 0 and active beyond; layer 0 in the Gram metric.
SETTINGS = ["--dataset", "synthetic", "--layers", "2", "--hidden", "40", "--degree", "2",
            "--partition", "dirichlet:0.5", "--metric", "gram", "--quiet"]
SHORT = [*SETTINGS, "--layers", "1", "--iters", "5"]  # far from O*: every iterate counts


def test_lockstep_is_the_edge_update_on_its_own_driver():
    alg = lookup("lockstep")
    assert isinstance(alg, EdgeADMM) and alg.driver == LOCKSTEP and alg.update == "edge"
    assert alg.per_neighbour and alg.edge_penalties and not alg.one_sided
    assert lookup("lockstep", "paper").update == "paper"
    assert lookup("async").driver != LOCKSTEP  # the registry's own instance is untouched
    assert alg.sent(10, 3, 0, 80) == (0, 10 * 3 * 80)  # messages, no puts


@pytest.mark.parametrize("mode,one_sided", [("lockstep", "async"), ("hood-lockstep", "hood")])
def test_simulated_lockstep_is_async_at_max_lead_0_and_constant_speed(tmp_path, mode, one_sided):
    step = ["--eta", "0.9"]  # the same step for both (hood's own default is smaller)
    lock, lock_model = simulate_saved(tmp_path, "lock", 4, "--mode", mode, *SHORT, *step,
                                 "--speed", "const:1e-3")
    asy, asy_model = simulate_saved(tmp_path, "async", 4, "--mode", one_sided, *SHORT, *step,
                               "--max-lead", "0", "--speed", "const:1e-3")
    assert worst_gap(lock_model, asy_model) <= 1e-12
    assert (lock.layers["activations"] == 5).all() and (lock.layers["puts"] == 0).all()
    assert (lock.layers["bytes_sent"] == asy.layers["bytes_sent"]).all()
    # Jitter and a straggler change the times, never the iterates (async's would change).
    jit, jit_model = simulate_saved(tmp_path, "jitter", 4, "--mode", mode, *SHORT, *step,
                               "--speed", "const:1e-3", "--jitter", "exp:1", "--slow", "1:5")
    assert worst_gap(lock_model, jit_model) == 0.0
    t_const, t_jit = (float(np.max(r.extra["sim_layer_end"])) for r in (lock, jit))
    assert t_jit > 2 * t_const


def test_simulated_lockstep_runs_any_one_sided_step_the_paper_update_too():
    # PaperStep keeps its own Z (no store): the drivers copy it into their messages.
    Os = {}
    for mode, lead in (("lockstep", 4), ("async", 0)):
        cfg = TrainConfig(mode=mode, update="paper", max_lead=lead, dataset="synthetic",
                          layers=1, hidden=40, degree=2, partition="dirichlet:0.5",
                          metric="identity", iters=5)
        opts = SimOptions(nodes=4, speed=SpeedModel.build("const:1e-3", 4, 2, 5, {}, None,
                                                          None, 0),
                          network=parse_network("shm"))
        Os[mode] = simulate(cfg, opts, quiet=True).Os
    assert cfg.algorithm.update == "paper"
    assert [len(nodes) for nodes in Os["lockstep"]] == [2] * 4  # 4 nodes, layers 0 and 1
    assert all(np.array_equal(x, y) for a, b in zip(Os["lockstep"], Os["async"])
               for x, y in zip(a, b))


LIVE = ("lockstep", "hood-lockstep")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Each lockstep mode's run log and saved model, from one five-rank job."""
    folder = tmp_path_factory.mktemp("lockstep")
    runs = {mode: ["--mode", mode, *SHORT, "--save-model", str(folder / f"{mode}-model.h5")]
            for mode in LIVE}
    paths = train_runs(folder, 5, runs, timeout=240)
    return {mode: (paths[mode], folder / f"{mode}-model.h5") for mode in LIVE}


@pytest.mark.mpirun
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", LIVE)
def test_live_lockstep_iterates_are_the_simulated_ones(live, tmp_path, mode):
    run, live_model = live[mode]
    log = read_runlog(run)
    assert log.layers["rel_distance"].min() > 1e-3  # far from O*
    _, sim_model = simulate_saved(tmp_path, "sim", 5, "--mode", mode, *SHORT)
    assert worst_gap(live_model, sim_model) <= 1e-10


def test_simulated_lockstep_local_rule_ends_every_layer_near_the_exact_solution(tmp_path):
    # async's own test of its edge variables (NodeCheck.async_done with the step's rhs),
    # voted as under eps; the distance is the run log's check, which no node read.
    log, _ = simulate_saved(tmp_path, "local", 5, "--mode", "lockstep", *SETTINGS,
                       "--iters", "3000", "--stop", "local:1e-3")
    acts = log.layers["activations"]
    assert (log.layers["stop_reason"] == reason_code("local")).all()
    assert (acts == acts[:, :1]).all() and (acts < 3000).all()
    assert log.layers["rel_distance"].max() <= 1e-2, log.layers["rel_distance"]
