"""``dssfn-mpi bench collect RUN.h5 ... --out SWEEP.h5``: run logs into one sweep file.

The run logs come right after ``collect``, before any option (argparse reads
positional arguments in one block).

For results made outside the driver, typically a Slurm job array where every
task wrote its own run log (``slurm/degree_array.sbatch``). Each log becomes
``/runs/<group>`` with the same ``bench_*`` labels the driver would have
given it, derived from the log's own attributes and configuration, so
``dssfn-mpi plot`` draws the same figures.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ...errors import require
from ...runlog import RunLog, read_runlog
from ..variants import decentralized, run_label
from .jobs import prepare_output
from .specs import slow_ranks

__all__ = ["guess_kind", "labels_for", "run_collect"]


def guess_kind(runs: list[RunLog]) -> str:
    """Which benchmark a set of run logs most likely belongs to."""
    dist = [r for r in runs if decentralized(str(r.attrs.get("mode", "")))]
    if len({int(r.attrs.get("nodes", 0)) for r in dist}) > 1:
        return "nodes"
    if len({int(r.attrs.get("degree", -1)) for r in dist}) > 1:
        return "degree"
    if any(r.config.get("slow") for r in dist):
        return "straggler"
    return "table2"


def labels_for(run: RunLog, kind: str) -> tuple[str, dict]:
    """Group name and ``bench_*`` attributes of one run log in a ``kind`` sweep."""
    a, cfg = run.attrs, run.config
    mode = run_label(str(a.get("mode", "")), cfg.get("max_lead", 4))
    meta: dict = {"bench": kind, "bench_mode": mode,
                  "bench_status": "ok" if run.complete else "failed",
                  "bench_error": "" if run.complete else "run log incomplete"}
    if not decentralized(mode) and kind != "table2":
        meta["bench_value"] = -1
        return "central", meta
    if kind == "degree":
        d = int(a.get("degree", -1))
        meta["bench_value"] = d
        return f"{mode}-d{d:02d}", meta
    if kind == "nodes":
        M = int(a.get("nodes", 0))
        meta["bench_value"] = M
        return f"{mode}-M{M:02d}", meta
    if kind == "straggler":
        slow = {int(k): float(v) for k, v in (cfg.get("slow") or {}).items()}
        factor = max(slow.values(), default=1.0)
        M = int(a.get("nodes", 0))
        if not slow:
            pattern = "none"
        elif sorted(slow) == slow_ranks(M, "one"):
            pattern = "one"
        else:
            pattern = "several"
        meta.update(bench_pattern=pattern, bench_factor=factor, bench_value=factor,
                    bench_slow_ranks=",".join(map(str, sorted(slow))))
        tag = "base" if pattern == "none" else f"{pattern}-x{factor:g}"
        return f"{mode}-{tag}", meta
    setting = str(cfg.get("preset") or "exact")  # the paper's setting: train --preset paper
    ds, seed = str(a.get("dataset", "")), int(a.get("seed", 0))
    meta.update(bench_setting=setting, bench_dataset=ds, bench_seed=seed, bench_value=-1)
    return f"{ds}-{setting}-{mode}-s{seed}", meta


def run_collect(args: argparse.Namespace) -> int:
    """Gather ``args.inputs`` into the sweep file ``args.out``; returns the exit status."""
    inputs = [Path(p) for p in (getattr(args, "inputs", None) or [])]
    require(bool(inputs), "bench collect needs run logs: dssfn-mpi bench collect "
            "results/*.h5 --out SWEEP.h5")
    out = prepare_output(args.out, args.overwrite, args.dry_run, "collect")
    for path in inputs:
        require(path.resolve() != out.resolve(), f"{path} is also --out; choose another file")
    runs = [read_runlog(p) for p in inputs]  # UserError names a bad file
    kind = getattr(args, "kind", None) or guess_kind(runs)
    used: set[str] = set()
    incomplete = 0
    for path, run in zip(inputs, runs):
        group, meta = labels_for(run, kind)
        base, k = group, 2
        while group in used:
            group, k = f"{base}-{k}", k + 1
        used.add(group)
        meta["bench_collected_from"] = str(path)
        incomplete += not run.complete
        if args.dry_run:
            print(f"{path} -> /runs/{group}")
            continue
        attrs = {k2: v for k2, v in run.attrs.items() if k2 != "write_time"}
        attrs.update(meta)
        dataclasses.replace(run, attrs=attrs).append_to(out, group)  # traces kept
        print(f"{path} -> /runs/{group}" + ("" if run.complete else "  (incomplete)"))
    if not args.dry_run:
        print(f"wrote {out}: {len(inputs)} runs as a {kind} sweep")
    if incomplete:
        print(f"{incomplete} run log(s) are incomplete (recorded as failed)")
        return 1
    return 0

