"""Tests for the run-log summary table (dssfn_mpi.analysis.report)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dssfn_mpi.analysis.report import format_report
from dssfn_mpi.errors import UserError
from dssfn_mpi.runlog import append_run, read_runlog, write_runlog

M = 3


def report_layers() -> dict[str, np.ndarray]:
    nan = np.nan
    return {
        "total_seconds": np.array([[1.0, 2.0, 4.0], [0.5, 0.5, 3.0]]),
        "solve_seconds": np.array([[0.5, 1.0, 1.5], [0.25, 0.25, 0.25]]),
        "rel_distance": np.array([[1e-2, 3e-2, 2e-2], [nan, nan, nan]]),
        "objective_gap": np.array([[1e-4, 5e-4, 2e-4], [1e-6, 1e-6, 2e-6]]),
        "test_accuracy": np.array([[0.9, 0.8, 0.85], [0.95, 0.9, 0.925]]),
        "staleness_mean": np.array([[0.0, 1.0, 2.0], [nan, 3.0, nan]]),
        "train_cost": np.array([[10.0, 20.0, 30.0], [nan, nan, nan]]),
        "train_accuracy": np.array([[0.5, 0.6, 0.7], [0.9, 0.9, 0.9]]),
    }


def test_format_report_numbers(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    attrs = {
        "mode": "async",
        "update": "arock",
        "dataset": "digits",
        "nodes": M,
        "topology": "ring",
        "degree": 2,
        "layers": 2,
        "hidden": 50,
        "iters": 200,
        "compiled_kernels": "off (numpy)",
    }
    write_runlog(path, attrs, report_layers())
    text = format_report(path)
    lines = text.splitlines()
    header = "\n".join(lines[:3])
    for expected in [
        "mode async",
        "update arock",
        "dataset digits",
        "M 3",
        "topology ring",
        "degree 2",
        "layers 2",
        "hidden 50",
        "iters 200",
        "complete no",
        "layers done 2/3",
        "compiled kernels off (numpy)",
    ]:
        assert expected in header
    rows = {ln.split()[0]: ln.split() for ln in lines if re.match(r"\s+\d+\s", ln)}
    assert rows["0"] == [
        "0",
        "2.000",
        "4.000",
        "1.000",
        "3.000e-02",
        "5.000e-04",
        "60",
        "60.00",
        "80.00/85.00/90.00",
        "1.00",
    ]
    assert rows["1"] == [
        "1",
        "0.500",
        "3.000",
        "0.250",
        "-",
        "2.000e-06",
        "-",
        "90.00",
        "90.00/92.50/95.00",
        "3.00",
    ]
    assert lines[-1].startswith("total time 7.000 s")
    assert lines[-1].endswith("final layer 1 test accuracy min/mean/max 90.00/92.50/95.00 %")
    # the same from a RunLog object
    assert format_report(read_runlog(path)).splitlines()[3:] == lines[3:]


def test_format_report_all_nan_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(path, {"nodes": 2}, {"gamma": np.ones((1, 2))})
    text = format_report(path)
    assert "total time - s" in text and "min/mean/max -/-/- %" in text
    empty = tmp_path / "empty.h5"
    write_runlog(empty, {"nodes": 2}, {})
    assert "no layers recorded" in format_report(empty)


def test_format_report_sweep_one_block_per_run(tmp_path: Path) -> None:
    path = tmp_path / "sweep.h5"
    append_run(path, "first", {"mode": "sync"}, report_layers())
    append_run(path, "second", {"mode": "async"}, {"gamma": np.ones((1, M))})
    text = format_report(path)
    blocks = text.split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == ["== run first ==", "== run second =="]
    assert "mode sync" in blocks[0] and "mode async" in blocks[1]
    assert blocks[0].splitlines()[-1].startswith("total time 7.000 s")


def test_format_report_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        format_report(tmp_path / "none.h5")
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    with pytest.raises(UserError, match="not an HDF5 file"):
        format_report(bad)


def test_format_report_shows_the_graph_facts(tmp_path: Path) -> None:
    from dssfn_mpi.analysis.report import report_json
    from dssfn_mpi.graph.topology import make_topology

    graph = make_topology("exponential", 8)
    path = tmp_path / "run.h5"
    write_runlog(path, {"nodes": 8, "topology": graph.name, **graph.facts()},
                 {"gamma": np.ones((1, 8))})
    assert "graph exponential: degree 5, diameter 2, spectral gap 0.6667" in format_report(path)
    attrs = report_json(path)["attrs"]
    assert (attrs["degree"], attrs["graph_min_degree"], attrs["graph_diameter"]) == (5, 5, 2)
    assert attrs["graph_spectral_gap"] == pytest.approx(2 / 3)
    # an older run log, before the facts: the defaults print as "-"
    old = tmp_path / "old.h5"
    write_runlog(old, {"nodes": 2, "topology": "ring", "degree": 1}, {"gamma": np.ones((1, 2))})
    assert "graph ring: degree 1, diameter -, spectral gap -" in format_report(old)
