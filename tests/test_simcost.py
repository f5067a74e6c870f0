"""``python -m dssfn_mpi.bench.micro.simcost --runs``: simulated runs' costs from their run logs."""

from __future__ import annotations

from dssfn_mpi.bench.micro import simcost
from dssfn_mpi.cli import main
from dssfn_mpi.runlog import read_runlog


def test_runs_table_reads_the_costs_of_simulated_runs(tmp_path, capsys):
    out = tmp_path / "sim.h5"
    assert main(["simulate", "--dataset", "digits", "--nodes", "6", "--topology", "ring",
                 "--mode", "sync", "--layers", "1", "--hidden", "60", "--iters", "300",
                 "--stop", "eps:1e-2", "--no-eval", "--quiet", "--out", str(out)]) == 0
    run = read_runlog(out)
    assert 0 < run.attrs["sim_cpu_seconds"] and run.attrs["sim_load_average"] >= 0
    assert simcost.main(["--runs", str(out)]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split(" | ")
    iters = run.layers["activations"].max(axis=1)
    assert row[0] == "| sync" and row[1] == "6" and row[3] == "2 of 2"
    assert row[4] == f"{iters[0]} / {iters[1]}"
    assert all(float(v) <= 1e-2 for v in row[5].split(" / "))  # both layers ended by eps
    assert simcost.main(["--runs", str(tmp_path / "missing.h5")]) == 2
    assert "missing.h5" in capsys.readouterr().err
