"""bench/figures/accuracy.py: time to eps of simulated runs, against the straggler factor and M."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from figstub import no_rendering

from dssfn_mpi.algorithms.stoprule import reason_code
from dssfn_mpi.bench.figures.accuracy import _after_layer0, main, simulated_points
from dssfn_mpi.cli import main as cli
from dssfn_mpi.errors import UserError

pytest.importorskip("matplotlib")

TINY = ["simulate", "--dataset", "digits", "--hidden", "60", "--layers", "1", "--iters", "400",
        "--stop", "eps:5e-2", "--no-eval", "--quiet", "--topology", "ring", "--overwrite",
        "--speed", "const:1e-3"]


def test_time_after_layer_0_counts_only_layers_that_reached_eps():
    eps, cap = reason_code("eps"), reason_code("cap")
    assert _after_layer0(np.array([5.0, 1.0, 2.0]), np.array([cap, eps, eps])) == 3.0
    assert math.isnan(_after_layer0(np.array([5.0, 1.0]), np.array([eps, cap])))


def test_straggler_and_node_count_curves(tmp_path, capsys, monkeypatch):
    runs = []
    for name, extra in [("a1", ["--nodes", "4"]), ("a3", ["--nodes", "4", "--slow", "0:3"]),
                        ("s1", ["--nodes", "4", "--mode", "sync"]),
                        ("s6", ["--nodes", "6", "--mode", "sync"])]:
        path = tmp_path / f"{name}.h5"
        assert cli([*TINY, "--out", str(path), *extra]) == 0
        runs.append(str(path))
    capsys.readouterr()
    rows = {(r["variant"], r["nodes"], r["factor"]): r["seconds"] for r in simulated_points(runs)}
    assert set(rows) == {("async-lead4", 4, 1.0), ("async-lead4", 4, 3.0), ("sync", 4, 1.0),
                         ("sync", 6, 1.0)}
    # A 3x straggler slows async's time to eps (simulated seconds), and every layer got there.
    # (--slow slows activations, as in train: they are what the constant speed costs.)
    assert rows[("async-lead4", 4, 3.0)] > 1.5 * rows[("async-lead4", 4, 1.0)] > 0
    assert main(["--sim", *runs, "--out", str(tmp_path / "fig" / "t.png")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\| simulated \| async-lead4 \S+ \| 4 \| 3 \| - \| \d", out), out
    assert (tmp_path / "fig" / "t.png").stat().st_size > 0
    # The points are written beside the figure, and the figure and table come back from them.
    import json

    from dssfn_mpi.bench.figures.accuracy import accuracy_markdown
    from dssfn_mpi.bench.pages import resultsdir
    from dssfn_mpi.bench.pages.mdtables import table_for

    data = tmp_path / "fig" / "t.json"
    summary = json.loads(data.read_text())
    assert resultsdir.file_kind(data) == "accuracy"
    assert accuracy_markdown(summary) in out and table_for(data.parent, "t.json") in out
    assert "digits" in summary["title"] and "simulated M = 4, 6" in summary["title"]
    resultsdir.add_file(tmp_path / "data", data, "dssfn-mpi bench accuracy ...",
                        {"time_to_eps": "tte"})
    # The figure was rendered above: here it is built again from its summary, not rendered.
    no_rendering(monkeypatch)
    built = {p.name for p in resultsdir.build_figures(tmp_path / "data", tmp_path / "again")}
    assert built == {"tte.png", "tte.pdf"}


def test_a_live_run_log_is_refused_as_simulated(tmp_path):
    from dssfn_mpi.runlog import write_runlog

    path = tmp_path / "live.h5"
    write_runlog(path, {"layers": 0, "nodes": 2, "complete": True, "config": "{}"}, {})
    with pytest.raises(UserError, match="not a simulated run log"):
        simulated_points([str(path)])
