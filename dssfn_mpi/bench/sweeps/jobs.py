"""Run a list of :class:`RunSpec` as separate jobs and collect them in one sweep file.

Each configuration is its own ``mpirun`` (or ``--launcher``) job writing a
temporary run log next to the sweep file; :func:`run_specs` then appends it to the
sweep with :meth:`dssfn_mpi.runlog.RunLog.append_to` (atomic per run), so an
interrupted sweep keeps every run finished so far. A configuration that
fails is recorded too (``bench_status = "failed"`` with the error line and
whatever layers its log holds; ``stopped`` when it ran into the job timeout, with the
layers it finished) and the sweep goes on; the caller turns the returned failures into
a non-zero exit status.

A spec may ask for busy processes beside its job (``bench contention``):
they are started right before it and killed right after it. SIGTERM and
SIGHUP end the sweep like Ctrl-C does: the running job gets SIGTERM (then
SIGKILL), its busy processes are killed, its temporary log is removed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ...errors import UserError, require
from ...fmt import percent
from ...launch import mpi_env, train_command
from ...runlog import RunLog, check_output_path, read_runlog
from ..summaries.projection import DEFAULT_NETWORK
from ..summaries.summary import summarize
from .busy import busy_processes, exit_on_signals
from .specs import RunSpec

__all__ = ["BUSY_LIFETIME", "JobResult", "job_env", "job_status", "prepare_output", "run_job",
           "run_specs"]

#: Deadline of a busy process (seconds) when the sweep has no job timeout; it
#: only matters if the driver hangs (see :mod:`dssfn_mpi.bench.sweeps.busy`).
BUSY_LIFETIME = 3600.0


@dataclass
class JobResult:
    """Outcome of one job: exit status, wall time and captured output."""

    returncode: int
    seconds: float
    stdout: str
    stderr: str
    timed_out: bool = False


def prepare_output(out: str | os.PathLike | None, overwrite: bool, dry_run: bool,
                   name: str = "sweep") -> Path:
    """Check ``--out`` before any job runs, creating its folder; with ``overwrite``,
    start a fresh file.

    A dry run needs no ``--out`` (its commands then name ``NAME.h5``) and
    creates nothing.

    Raises
    ------
    UserError
        No ``--out`` for a real run; the file exists without ``overwrite``, or
        its folder cannot be made or is not writable.
    """
    if out is None:
        require(dry_run, f"bench {name} needs --out FILE.h5 (only --dry-run goes without)")
        return Path(f"{name}.h5")
    path = Path(out)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        if dry_run:
            print(f"note: {parent} does not exist yet; the real run creates it",
                  file=sys.stderr)
            return path
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--out {path}: cannot create its folder {parent} "
                            f"({exc.strerror}); choose another --out") from None
    check_output_path(path, overwrite)
    if overwrite and path.exists() and not dry_run:
        path.unlink()  # appending would otherwise add to the old sweep
    return path


def job_env(launcher: str | None) -> dict[str, str]:
    """Environment of a job: the single-machine Open MPI settings without a
    launcher, the caller's environment (one BLAS thread per rank) with one."""
    if not launcher:
        return mpi_env()
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


def _stop_job(proc: subprocess.Popen, grace: float = 10.0) -> tuple[Any, Any]:
    """End a job: SIGTERM first, SIGKILL after ``grace`` seconds; returns its output.

    The job runs in a process group of its own (:func:`run_job`), and both
    signals go to that whole group: Open MPI's ``mpirun`` forwards SIGTERM to its
    ranks, but killed with SIGKILL it dies alone, and its ranks (children of
    ``prterun``) would run on, holding the output pipes open.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # already gone
        try:
            return proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    # Something outside the group still holds the pipes: stop reading them.
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    proc.wait()
    return "", ""


#: A process group of its own, so that _stop_job can signal every process of a job,
#: but in the driver's session: with Linux autogroup scheduling (on by default) a new
#: session would put the job in a CPU group of its own, which gets its share of the
#: cores whatever ``bench contention``'s busy processes (in the driver's group) do.
#: Measured, 4 ranks and 1 / 2 busy processes on 2 cores, sync under --wait spin: 2.2x /
#: 1.8x slower than idle with the job in a session of its own, 35x / 72x in one group.
_OWN_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp})


def run_job(cmd: Sequence[str], env: dict[str, str], timeout: float | None) -> JobResult:
    """Run one job to completion (or until ``timeout`` seconds), capturing its output.

    A job that times out, or whose driver is interrupted (``KeyboardInterrupt``,
    ``SystemExit`` from :func:`~dssfn_mpi.bench.sweeps.busy.exit_on_signals`), is ended
    with SIGTERM, then SIGKILL; an interruption is re-raised.
    """
    t0 = time.monotonic()
    proc = subprocess.Popen(list(cmd), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **_OWN_GROUP)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = _stop_job(proc)
        return JobResult(-9, time.monotonic() - t0, out or "", err or "", True)
    except BaseException:
        _stop_job(proc)
        raise
    return JobResult(proc.returncode, time.monotonic() - t0, out, err)


def job_status(res: JobResult, log: Any) -> str:
    """``ok`` (finished, its log complete), ``stopped`` (ended at the job timeout: its log
    keeps the layers it finished) or ``failed``."""
    if res.returncode == 0 and log is not None and log.complete:
        return "ok"
    return "stopped" if res.timed_out else "failed"


def error_line(res: JobResult, timeout: float | None, log: Any = None) -> str:
    """The one line that best says why a job failed or stopped."""
    if res.timed_out:
        done = 0 if log is None else log.layers_done
        return f"stopped at the job timeout of {timeout:g} s after {done} finished layers"
    lines = [ln.strip() for ln in (res.stderr or "").splitlines() if ln.strip()]
    ours = [ln for ln in lines if "error:" in ln or "Error" in ln]
    line = (ours or lines or [f"exit status {res.returncode} with no message"])[-1]
    return line[:500]


def _read_log(path: Path):
    if not path.exists():
        return None
    try:
        return read_runlog(path)
    except (UserError, OSError, KeyError, ValueError):
        return None  # a half-made or foreign file: record the failure without it


def _record(out: Path, spec: RunSpec, log, meta: dict[str, Any]) -> None:
    """Append one run (or its failure record) to the sweep file."""
    if log is not None:
        attrs = {k: v for k, v in log.attrs.items() if k not in ("write_time",)}
        attrs.update(meta)
        dataclasses.replace(log, attrs=attrs).append_to(out, spec.group)  # traces kept
        return
    attrs = {"mode": meta.get("bench_mode", ""), "nodes": spec.nodes or 1, "complete": False,
             **meta}
    attrs["mode"] = str(attrs["mode"]).replace("-unbounded", "")
    RunLog(attrs, {}).append_to(out, spec.group)


def run_specs(
    specs: Sequence[RunSpec],
    out: Path,
    *,
    launcher: str | None = None,
    dry_run: bool = False,
    job_timeout: float | None = None,
    common_meta: dict[str, Any] | None = None,
    target_iters: int | None = None,
    network: str | None = None,
    stream: TextIO | None = None,
) -> list[str]:
    """Run every spec as a job and append its run log to the sweep file ``out``.

    Parameters
    ----------
    specs : sequence of RunSpec
        The configurations, run in order.
    out : pathlib.Path
        The sweep file (checked by :func:`prepare_output` beforehand).
    launcher : str, optional
        E.g. ``"srun --mpi=pmix"``; default: this environment's mpirun.
    dry_run : bool
        Print the commands and run nothing.
    job_timeout : float, optional
        Seconds before a job is stopped and recorded as ``stopped`` with the
        layers its log finished (busy processes of a spec live at most 60 s longer).
    common_meta : dict, optional
        Attributes stored with every run (preset name, ...).
    target_iters : int, optional
        The sweep's K, for the scaled time of shortened runs in progress lines.
    network : str, optional
        Network of the projected time in progress lines (default ``shm``);
        shown for runs that carry a trace.
    stream : file, optional
        Where progress goes (default stdout).

    Returns
    -------
    list of str
        Group names of the configurations that failed (not those stopped at the
        job timeout).
    """
    stream = stream or sys.stdout
    env = job_env(launcher)
    parts = out.parent / f".{out.name}.runs"
    job = _Job(out, parts, env, launcher, job_timeout, common_meta or {}, target_iters,
               network or DEFAULT_NETWORK, stream,
               width=max((len(s.label) for s in specs), default=10), total=len(specs))
    if dry_run:
        for spec in specs:
            busy = (f"  # beside {spec.busy} busy process{'es' if spec.busy > 1 else ''}"
                    if spec.busy else "")
            print(shlex.join(job.command(spec)) + busy, file=stream, flush=True)
        return []
    parts.mkdir(exist_ok=True)
    failures: list[str] = []
    try:
        with exit_on_signals():
            for i, spec in enumerate(specs, 1):
                if not job.run(i, spec):
                    failures.append(spec.group)
    finally:
        try:
            parts.rmdir()
        except OSError:
            pass  # not empty: something else left files there; leave them
    return failures


@dataclass
class _Job:
    """What every job of one sweep shares; :meth:`run` runs and records one spec."""

    out: Path
    parts: Path
    env: dict[str, str]
    launcher: str | None
    timeout: float | None
    common_meta: dict[str, Any]
    target_iters: int | None
    network: str
    stream: TextIO
    width: int
    total: int

    def tmp(self, spec: RunSpec) -> Path:
        return self.parts / f"{spec.group}.h5"

    def command(self, spec: RunSpec) -> list[str]:
        args = [*spec.train_args, "--out", str(self.tmp(spec)), "--overwrite", "--quiet"]
        return train_command(spec.nodes, args, self.launcher if spec.nodes is not None else None)

    def run(self, i: int, spec: RunSpec) -> bool:
        """Run spec number ``i`` (beside its busy processes), append it to the sweep,
        print its progress line; True if it succeeded."""
        tmp, cmd = self.tmp(spec), self.command(spec)
        print(f"[{i:>{len(str(self.total))}}/{self.total}] {spec.label:<{self.width}} ", end="",
              file=self.stream, flush=True)
        lifetime = BUSY_LIFETIME if self.timeout is None else self.timeout + 60.0
        try:
            with busy_processes(spec.busy, lifetime):
                res = run_job(cmd, self.env, self.timeout)
            log = _read_log(tmp)
            ok = res.returncode == 0 and log is not None and log.complete
            status = job_status(res, log)
            meta = {
                **self.common_meta,
                **spec.meta,
                "bench_status": status,
                "bench_returncode": int(res.returncode),
                "bench_seconds": float(res.seconds),
                "bench_command": shlex.join(cmd),
                "bench_error": "" if ok else error_line(res, self.timeout, log),
            }
            try:
                _record(self.out, spec, log, meta)
            except (ValueError, UserError) as exc:
                # The run log does not fit this writer (e.g. a newer field): keep the
                # file for inspection and record the configuration as failed.
                kept = self.parts / f"{spec.group}.kept.h5"
                tmp.replace(kept)
                ok = False
                meta.update(bench_status="failed", bench_error=(
                    f"could not append its run log ({exc}); kept as {kept}"[:500]))
                _record(self.out, spec, None, meta)
        finally:
            tmp.unlink(missing_ok=True)
        if ok:
            s = summarize(spec.group, log, self.target_iters, network=self.network)
            extra = ""
            if self.target_iters and s.iters != self.target_iters:
                extra = f" (K={s.iters}; {s.scaled_seconds:.2f} s at K={self.target_iters})"
            if math.isfinite(s.projected_seconds):
                extra += f"  projected {s.network} {s.projected_seconds:.3f} s"
            print(f"ok      job {res.seconds:6.1f} s  train {s.train_seconds:7.2f} s{extra}  "
                  f"test acc {percent(s.acc_mean, suffix=' %')}", file=self.stream, flush=True)
        else:
            print(f"{meta['bench_status'].upper():<7} job {res.seconds:6.1f} s  "
                  f"{meta['bench_error']}", file=self.stream, flush=True)
        return ok or meta["bench_status"] == "stopped"
