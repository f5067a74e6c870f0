"""Run a list of :class:`RunSpec` as separate jobs and collect them in one sweep file.

Each configuration is its own ``mpirun`` (or ``--launcher``) job writing a
temporary run log next to the sweep file; the driver then appends it to the
sweep with :func:`dssfn_mpi.runlog.append_run` (atomic per run), so an
interrupted sweep keeps every run finished so far. A configuration that
fails is recorded too (``bench_status = "failed"`` with the error line and
whatever layers its log holds) and the sweep goes on; the caller turns the
returned failures into a non-zero exit status.
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import UserError
from ..fmt import percent
from ..launch import mpi_env, train_command
from ..runlog import append_run, check_output_path, read_runlog
from .projection import DEFAULT_NETWORK
from .specs import RunSpec
from .summary import summarize

__all__ = ["JobResult", "job_env", "prepare_output", "run_job", "run_specs", "timing_of"]


@dataclass
class JobResult:
    """Outcome of one job: exit status, wall time and captured output."""

    returncode: int
    seconds: float
    stdout: str
    stderr: str
    timed_out: bool = False


def prepare_output(out: str | os.PathLike, overwrite: bool, dry_run: bool) -> Path:
    """Check ``--out`` before any job runs; with ``overwrite``, start a fresh file.

    Raises
    ------
    UserError
        The file exists without ``overwrite``, or its directory is missing
        or not writable.
    """
    path = Path(out)
    parent = path.parent if str(path.parent) else Path(".")
    if dry_run and not parent.exists():
        # A dry run may be made before the results folder exists (Slurm templates).
        print(f"note: {parent} does not exist yet; create it before the real run",
              file=sys.stderr)
        return path
    check_output_path(path, overwrite)
    if overwrite and path.exists() and not dry_run:
        path.unlink()  # append_run would otherwise add to the old sweep
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


def run_job(cmd: Sequence[str], env: dict[str, str], timeout: float | None) -> JobResult:
    """Run one job to completion (or until ``timeout`` seconds), capturing its output."""
    t0 = time.monotonic()
    try:
        proc = subprocess.run(list(cmd), env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        def text(b: Any) -> str:
            return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")

        return JobResult(-9, time.monotonic() - t0, text(exc.stdout), text(exc.stderr), True)
    return JobResult(proc.returncode, time.monotonic() - t0, proc.stdout, proc.stderr)


def error_line(res: JobResult, timeout: float | None) -> str:
    """The one line that best says why a job failed."""
    if res.timed_out:
        return f"killed after the job timeout of {timeout:g} s"
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


def timing_of(log: Any) -> dict[str, Any]:
    """The trace groups of a read run log, as ``append_run`` keywords (only those it has),
    so a sweep keeps every run's ``/trace`` and ``/trajectory``."""
    return {key: getattr(log, key) for key in ("trace", "trajectory", "trace_attrs")
            if getattr(log, key, None)}


def _record(out: Path, spec: RunSpec, log, meta: dict[str, Any]) -> None:
    """Append one run (or its failure record) to the sweep file."""
    if log is not None:
        attrs = {k: v for k, v in log.attrs.items() if k not in ("write_time",)}
        attrs.update(meta)
        append_run(out, spec.group, attrs, log.layers, log.ranks, log.extra, **timing_of(log))
        return
    attrs = {"mode": meta.get("bench_mode", ""), "nodes": spec.nodes or 1, "complete": False,
             **meta}
    attrs["mode"] = str(attrs["mode"]).replace("-unbounded", "")
    append_run(out, spec.group, attrs, {})


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
        Seconds before a job is killed and recorded as failed.
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
        Group names of the configurations that failed.
    """
    stream = stream or sys.stdout
    env = job_env(launcher)
    parts = out.parent / f".{out.name}.runs"
    if not dry_run:
        parts.mkdir(exist_ok=True)
    failures: list[str] = []
    width = max((len(s.label) for s in specs), default=10)
    total = len(specs)
    for i, spec in enumerate(specs, 1):
        tmp = parts / f"{spec.group}.h5"
        args = [*spec.train_args, "--out", str(tmp), "--overwrite", "--quiet"]
        cmd = train_command(spec.nodes, args, launcher if spec.nodes is not None else None)
        if dry_run:
            print(shlex.join(cmd), file=stream, flush=True)
            continue
        print(f"[{i:>{len(str(total))}}/{total}] {spec.label:<{width}} ", end="",
              file=stream, flush=True)
        res = run_job(cmd, env, job_timeout)
        log = _read_log(tmp)
        ok = res.returncode == 0 and log is not None and log.complete
        meta = {
            **(common_meta or {}),
            **spec.meta,
            "bench_status": "ok" if ok else "failed",
            "bench_returncode": int(res.returncode),
            "bench_seconds": float(res.seconds),
            "bench_command": shlex.join(cmd),
            "bench_error": "" if ok else error_line(res, job_timeout),
        }
        try:
            _record(out, spec, log, meta)
        except (ValueError, UserError) as exc:
            # The run log does not fit this writer (e.g. a newer field): keep the
            # file for inspection and record the configuration as failed.
            kept = parts / f"{spec.group}.kept.h5"
            tmp.replace(kept)
            ok = False
            meta.update(bench_status="failed",
                        bench_error=f"could not append its run log ({exc}); kept as {kept}"[:500])
            _record(out, spec, None, meta)
        finally:
            tmp.unlink(missing_ok=True)
        if ok:
            s = summarize(spec.group, log, target_iters, network=network or DEFAULT_NETWORK)
            extra = ""
            if target_iters and s.iters != target_iters:
                extra = f" (K={s.iters}; {s.scaled_seconds:.2f} s at K={target_iters})"
            if math.isfinite(s.projected_seconds):
                extra += f"  projected {s.network} {s.projected_seconds:.3f} s"
            print(f"ok      job {res.seconds:6.1f} s  train {s.train_seconds:7.2f} s{extra}  "
                  f"test acc {percent(s.acc_mean, suffix=' %')}", file=stream, flush=True)
        else:
            failures.append(spec.group)
            print(f"FAILED  job {res.seconds:6.1f} s  {meta['bench_error']}",
                  file=stream, flush=True)
    if not dry_run:
        try:
            parts.rmdir()
        except OSError:
            pass  # not empty: something else left files there; leave them
    return failures
