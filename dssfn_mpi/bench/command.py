"""``dssfn-mpi bench NAME``: pick the preset, build the specs, run them, report."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..errors import UserError, require
from . import specs as S
from .jobs import prepare_output, run_specs
from .presets import Preset, apply_overrides, as_dict, get_preset

__all__ = ["available_datasets", "resolve_preset", "run"]


def _split(text: str | None) -> list[str]:
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def resolve_preset(args: argparse.Namespace) -> Preset:
    """The preset of ``args.name`` with ``--set``, ``--values``, ``--modes``,
    ``--seeds`` and ``--datasets`` applied."""
    p = get_preset(args.name, args.preset)
    p = apply_overrides(p, getattr(args, "set", None))
    changes: list[str] = []
    if getattr(args, "values", None):
        changes.append(f"values={args.values}")
    if getattr(args, "modes", None):
        changes.append(f"modes={args.modes}")
    if getattr(args, "datasets", None):
        changes.append(f"datasets={args.datasets}")
    p = apply_overrides(p, changes)
    if getattr(args, "seeds", None) is not None:
        p = apply_overrides(p, [f"seeds={args.seeds}"])
    return p


def available_datasets(p: Preset, data_dir: str | None, explicit: bool,
                       stream: TextIO | None = None) -> list[str]:
    """Datasets of ``p`` whose files load; a missing one is skipped (said so) unless
    it was asked for explicitly, which is a user error."""
    from ..datasets import load_dataset

    found = []
    for ds in p.datasets:
        try:
            load_dataset(ds, data_dir)
        except UserError as exc:
            if explicit:
                raise UserError(f"table2: {exc}") from None
            print(f"skipping {ds}: files not found or unreadable "
                  f"(see `dssfn-mpi data list`)", file=stream or sys.stdout, flush=True)
            continue
        found.append(ds)
    require(bool(found), "table2: none of the datasets could be loaded; pass --data-dir DIR "
            "or --datasets digits")
    return found


def _projection(args: argparse.Namespace) -> tuple[str, float]:
    """``--network`` and ``--eps`` (defaults when called without them)."""
    from .projection import DEFAULT_EPS, DEFAULT_NETWORK

    return (getattr(args, "network", None) or DEFAULT_NETWORK,
            getattr(args, "eps", None) or DEFAULT_EPS)


def run(args: argparse.Namespace) -> int:
    """Run benchmark ``args.name``; return the exit status (1 if any run failed)."""
    if args.name == "collect":
        from .collect import run_collect

        return run_collect(args)
    p = resolve_preset(args)
    to_eps = getattr(args, "to_eps", None)
    if to_eps:
        p = S.eps_form(p, to_eps, bool(getattr(args, "modes", None)))
    out = prepare_output(args.out, args.overwrite, args.dry_run, args.name)
    if args.name == "rma":
        from .rma_jobs import run_rma_bench

        return run_rma_bench(p, out, args.launcher, args.dry_run)
    data_dir = getattr(args, "data_dir", None)
    datasets: list[str] = []
    if args.name == "degree":
        for d in p.values:
            require(1 <= int(d) < p.nodes,
                    f"degree: d = {d} is impossible with M = {p.nodes} nodes (1..{p.nodes - 1})")
        specs = S.degree_specs(p, data_dir)
    elif args.name == "nodes":
        specs = S.nodes_specs(p, data_dir)
    elif args.name == "table2":
        from ..config import PAPER_TABLE3

        datasets = available_datasets(p, data_dir, bool(getattr(args, "datasets", None)))
        # At equal accuracy only the exact setting: eq. (7)'s bias keeps async from eps.
        paper_ok = {d: d in PAPER_TABLE3 and not to_eps for d in datasets}
        specs = S.table2_specs(p, datasets, data_dir, paper_ok)
    elif args.name == "straggler":
        specs = S.straggler_specs(p, data_dir)
    elif args.name == "noise":
        specs = S.noise_specs(p, data_dir)
    elif args.name == "contention":
        specs = S.contention_specs(p, data_dir)
    else:
        raise UserError(f"unknown benchmark {args.name!r}")
    if to_eps and not getattr(args, "no_simulate", False):
        specs += S.simulated_specs(args.name, p, data_dir, datasets)
    require(bool(specs), f"{args.name}: nothing to run (empty --values or --modes?)")
    if not args.dry_run:
        print(f"bench {args.name}, preset {args.preset}: {len(specs)} runs -> {out}", flush=True)
    failures = run_specs(
        specs, out, launcher=args.launcher, dry_run=args.dry_run,
        job_timeout=getattr(args, "job_timeout", None),
        common_meta={"bench_preset": args.preset, "bench_preset_json": as_dict(p),
                     "bench_target_iters": p.iters},
        target_iters=p.iters,
        network=getattr(args, "network", None),
    )
    if args.dry_run:
        return 0
    if args.name in ("table2", "contention", "noise") or to_eps:
        from ..runlog import read_sweep
        from .plot import summary_markdown
        from .records import sweep_summaries

        for summary in sweep_summaries(read_sweep(out), *_projection(args)).values():
            print()
            print(summary_markdown(summary))
    print(f"wrote {out}" + (f" ({len(failures)} of {len(specs)} runs failed)" if failures else ""))
    if failures:
        print(f"failed: {', '.join(failures)} (see bench_error in each run group)",
              file=sys.stderr, flush=True)
        return 1
    return 0

