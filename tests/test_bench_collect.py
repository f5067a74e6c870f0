"""``dssfn-mpi bench collect`` on made-up run logs of every benchmark kind.

A Slurm array leaves one run log per task; ``collect`` must turn them into the
sweep file the driver would have written: one ``/runs/<group>`` per log with
the driver's group name and ``bench_*`` labels, the data untouched. The logs
here are written with :func:`dssfn_mpi.runlog.write_runlog` (no MPI), each
with its own numbers so a mixed-up copy shows. ``plot`` builds every figure of the
collected sweep but renders none (tests/figstub.py; the real sweeps of
tests/test_benchmarks.py render each view).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from figstub import no_rendering

from dssfn_mpi.cli import main
from dssfn_mpi.runlog import read_sweep, write_runlog

LAYERS = 2  # rows per log (L = 1)


@pytest.fixture(autouse=True)
def _figures_built_not_rendered(monkeypatch):
    """Every test's ``plot``: figures built, written as placeholders."""
    no_rendering(monkeypatch)


def _log(path: Path, mode: str, nodes: int, *, degree: int = 2, dataset: str = "digits",
         seed: int = 0, complete: bool = True, **config) -> Path:
    """A run log as train writes it, as far as collect and plot read it."""
    cfg = {"dataset": dataset, "mode": mode, "degree": degree, "seed": seed, "max_lead": 4,
           "slow": {}, "preset": None, "layers": LAYERS - 1}
    cfg.update(config)
    tag = sum(map(ord, path.name))  # distinct numbers per log
    layers = {
        "test_accuracy": np.full((LAYERS, nodes), 0.5 + tag % 97 / 1000),
        "train_accuracy": np.full((LAYERS, nodes), 0.6),
        "total_seconds": np.arange(1, LAYERS * nodes + 1, dtype=float).reshape(LAYERS, nodes)
        + tag,
        "solve_seconds": np.full((LAYERS, nodes), 0.5),
        "wait_seconds": np.full((LAYERS, nodes), 0.1),
        "rel_distance": np.full((LAYERS, nodes), 1e-3),
        "activations": np.full((LAYERS, nodes), 200, dtype=np.int64),
    }
    attrs = {"mode": mode, "nodes": nodes, "degree": degree if mode != "central" else -1,
             "dataset": dataset, "seed": seed, "layers": LAYERS - 1, "iters": 200,
             "config": json.dumps(cfg), "complete": complete}
    if not complete:
        layers = {k: v[:1] for k, v in layers.items()}
    write_runlog(path, attrs, layers)
    return path


def _collect(capsys, tmp_path: Path, files: list[Path], *extra: str):
    out = tmp_path / "sweep.h5"
    code = main(["bench", "collect", *map(str, files), "--out", str(out), *extra])
    stdout = capsys.readouterr().out
    return code, out, stdout


def _check_runs(out: Path, files: dict[str, Path], kind: str) -> dict:
    """Every log is one group of the expected name, labelled, with its data intact."""
    from dssfn_mpi.runlog import read_runlog

    runs = read_sweep(out)
    assert list(runs) == list(files)  # names, and the order of the inputs
    for name, path in files.items():
        run, log = runs[name], read_runlog(path)
        assert run.attrs["bench"] == kind, name
        assert run.attrs["bench_collected_from"] == str(path)
        assert run.attrs["bench_status"] == ("ok" if log.complete else "failed")
        assert run.attrs["mode"] == log.attrs["mode"] and run.nodes == log.nodes
        for key, value in log.layers.items():
            np.testing.assert_array_equal(run.layers[key], value, err_msg=f"{name} {key}")
    return runs


def _plot(tmp_path: Path, out: Path) -> set[str]:
    fig = tmp_path / "fig"
    assert main(["plot", str(out), "--out", str(fig)]) == 0
    return {p.name for p in fig.iterdir()}


def test_collect_degree_sweep(tmp_path, capsys):
    files = {"central": _log(tmp_path / "c.h5", "central", 1)}
    for d in (2, 4):
        for mode in ("async", "sync-graph"):
            files[f"{mode}-d{d:02d}"] = _log(tmp_path / f"{mode}{d}.h5", mode, 6, degree=d)
    code, out, stdout = _collect(capsys, tmp_path, list(files.values()))
    assert code == 0, stdout
    assert "as a degree sweep" in stdout
    runs = _check_runs(out, files, "degree")
    assert runs["central"].attrs["bench_value"] == -1
    assert runs["sync-graph-d04"].attrs["bench_value"] == 4
    assert runs["async-d02"].attrs["bench_mode"] == "async"
    assert {"degree_time.png", "degree.md"} <= _plot(tmp_path, out)


def test_collect_nodes_sweep(tmp_path, capsys):
    files = {}
    for M in (2, 3):
        for mode in ("async", "sync"):
            files[f"{mode}-M{M:02d}"] = _log(tmp_path / f"{mode}{M}.h5", mode, M,
                                             degree=min(M - 1, 2), topology="ring")
    code, out, stdout = _collect(capsys, tmp_path, list(files.values()))
    assert code == 0, stdout
    runs = _check_runs(out, files, "nodes")
    assert runs["sync-M03"].attrs["bench_value"] == 3
    assert {"nodes_time.png"} <= _plot(tmp_path, out)


def test_collect_straggler_sweep(tmp_path, capsys):
    M = 8  # "several" slows a quarter of the ranks, spread out: 0 and 4
    files = {
        "async-base": _log(tmp_path / "base.h5", "async", M),
        "async-one-x5": _log(tmp_path / "one.h5", "async", M, slow={"0": 5.0}),
        "async-several-x5": _log(tmp_path / "sev.h5", "async", M,
                                 slow={"0": 5.0, "4": 5.0}),
        "async-unbounded-one-x10": _log(tmp_path / "unb.h5", "async", M, max_lead=None,
                                        slow={"0": 10.0}),
        "sync-one-x5": _log(tmp_path / "sync.h5", "sync", M, slow={"0": 5.0}),
    }
    code, out, stdout = _collect(capsys, tmp_path, list(files.values()))
    assert code == 0, stdout
    runs = _check_runs(out, files, "straggler")
    a = runs["async-several-x5"].attrs
    assert (a["bench_pattern"], a["bench_factor"], a["bench_slow_ranks"]) == ("several", 5.0,
                                                                             "0,4")
    a = runs["async-unbounded-one-x10"].attrs
    assert (a["bench_mode"], a["bench_pattern"], a["bench_value"]) == ("async-unbounded",
                                                                        "one", 10.0)
    assert runs["async-base"].attrs["bench_pattern"] == "none"
    assert {"straggler.png"} <= _plot(tmp_path, out)


def test_collect_table2_sweep(tmp_path, capsys):
    files = {}
    for ds, setting, seed in (("digits", "exact", 0), ("vowel", "paper", 1)):
        preset = "paper" if setting == "paper" else None
        files[f"{ds}-{setting}-central-s{seed}"] = _log(
            tmp_path / f"{ds}c.h5", "central", 1, dataset=ds, seed=seed, preset=preset)
        for mode in ("sync", "async"):
            files[f"{ds}-{setting}-{mode}-s{seed}"] = _log(
                tmp_path / f"{ds}{mode}.h5", mode, 4, dataset=ds, seed=seed, preset=preset)
    code, out, stdout = _collect(capsys, tmp_path, list(files.values()))
    assert code == 0, stdout
    runs = _check_runs(out, files, "table2")
    a = runs["vowel-paper-async-s1"].attrs
    assert (a["bench_setting"], a["bench_dataset"], a["bench_seed"]) == ("paper", "vowel", 1)
    assert runs["digits-exact-central-s0"].attrs["bench_setting"] == "exact"
    assert {"table2.md"} <= _plot(tmp_path, out)


def test_collect_explicit_kind_duplicates_and_incomplete_logs(tmp_path, capsys):
    # Alike logs that would be guessed "table2", collected as a degree sweep; two
    # share a label and get distinct groups; an incomplete one is kept as failed.
    files = {
        "async-d02": _log(tmp_path / "a.h5", "async", 4),
        "async-d02-2": _log(tmp_path / "b.h5", "async", 4),
        "sync-d02": _log(tmp_path / "c.h5", "sync", 4, complete=False),
    }
    code, out, stdout = _collect(capsys, tmp_path, list(files.values()), "--kind", "degree")
    assert code == 1, stdout  # an incomplete log is reported
    assert "incomplete" in stdout
    runs = _check_runs(out, files, "degree")
    assert runs["sync-d02"].attrs["bench_status"] == "failed"
    assert not runs["sync-d02"].complete and runs["sync-d02"].layers_done == 1


def test_collect_dry_run_writes_nothing(tmp_path, capsys):
    files = [_log(tmp_path / "a.h5", "async", 4, degree=2),
             _log(tmp_path / "b.h5", "async", 4, degree=3)]
    code, out, stdout = _collect(capsys, tmp_path, files, "--dry-run")
    assert code == 0 and not out.exists()
    assert f"{files[0]} -> /runs/async-d02" in stdout
    assert f"{files[1]} -> /runs/async-d03" in stdout


@pytest.mark.parametrize("extra", [[], ["--kind", "nodes"]])
def test_collect_refuses_its_own_output(tmp_path, capsys, extra):
    log = _log(tmp_path / "a.h5", "async", 4)
    code = main(["bench", "collect", str(log), "--out", str(log), "--overwrite", *extra])
    assert code == 2
    assert "also --out" in capsys.readouterr().err
