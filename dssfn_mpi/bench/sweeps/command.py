"""``dssfn-mpi bench NAME`` of a sweep: pick the preset, build the specs, run them, report.

Each sweep's configurations come from its entry of :data:`SPECS`; ``rma`` runs through
:func:`run_rma`. Which function runs a subcommand is declared with its options
(:mod:`dssfn_mpi.bench.sweeps.parser`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Optional, TextIO

from ...errors import UserError, require
from . import specs as S
from .jobs import prepare_output, run_specs
from .presets import Preset, apply_overrides, as_dict, get_preset

__all__ = ["SPECS", "available_datasets", "resolve_preset", "run", "run_rma"]


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
    from ...datasets import load_dataset

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
    from ..summaries.projection import DEFAULT_EPS, DEFAULT_NETWORK

    return (getattr(args, "network", None) or DEFAULT_NETWORK,
            getattr(args, "eps", None) or DEFAULT_EPS)


#: Builds a sweep's configurations: ``(preset, data_dir, args) -> (specs, datasets)``
#: (``datasets``: those table2 found, for its simulated runs; empty for the others).
SpecsBuilder = Callable[[Preset, Optional[str], argparse.Namespace],
                        tuple[list[S.RunSpec], list[str]]]


def _degree_specs(p: Preset, data_dir: str | None,
                  args: argparse.Namespace) -> tuple[list[S.RunSpec], list[str]]:
    for d in p.values:
        require(1 <= int(d) < p.nodes,
                f"degree: d = {d} is impossible with M = {p.nodes} nodes (1..{p.nodes - 1})")
    return S.degree_specs(p, data_dir), []


def _table2_specs(p: Preset, data_dir: str | None,
                  args: argparse.Namespace) -> tuple[list[S.RunSpec], list[str]]:
    from ...config import PAPER_TABLE3

    datasets = available_datasets(p, data_dir, bool(getattr(args, "datasets", None)))
    # At equal accuracy only the exact setting: eq. (7)'s bias keeps async from eps.
    paper_ok = {d: d in PAPER_TABLE3 and not getattr(args, "to_eps", None) for d in datasets}
    return S.table2_specs(p, datasets, data_dir, paper_ok), datasets


def _decompose_specs(p: Preset, data_dir: str | None) -> list[S.RunSpec]:
    from .decompose import decompose_specs

    return decompose_specs(p, data_dir)


def _specs_of(build: Callable[[Preset, str | None], list[S.RunSpec]]) -> SpecsBuilder:
    """A sweep whose configurations need only the preset and the data folder."""
    return lambda p, data_dir, args: (build(p, data_dir), [])


#: Every sweep (:data:`dssfn_mpi.bench.sweeps.parser.SWEEPS`) and how its configurations are built.
SPECS: dict[str, SpecsBuilder] = {
    "degree": _degree_specs,
    "nodes": _specs_of(S.nodes_specs),
    "table2": _table2_specs,
    "straggler": _specs_of(S.straggler_specs),
    "noise": _specs_of(S.noise_specs),
    "contention": _specs_of(S.contention_specs),
    "decompose": _specs_of(_decompose_specs),
}


def _preset_and_output(args: argparse.Namespace) -> tuple[Preset, Path]:
    """The preset with the command line's changes (and ``--to-eps``), and the checked output."""
    p = resolve_preset(args)
    to_eps = getattr(args, "to_eps", None)
    if to_eps:
        p = S.eps_form(p, to_eps, bool(getattr(args, "modes", None)))
    return p, prepare_output(args.out, args.overwrite, args.dry_run, args.name)


def run_rma(args: argparse.Namespace) -> int:
    """Run ``bench rma``: the one-sided micro-benchmark as 2-rank jobs; the exit status."""
    from ..micro.rma_jobs import run_rma_bench

    p, out = _preset_and_output(args)
    return run_rma_bench(p, out, args.launcher, args.dry_run)


def run(args: argparse.Namespace) -> int:
    """Run sweep ``args.name``; return the exit status (1 if any run failed)."""
    p, out = _preset_and_output(args)
    to_eps = getattr(args, "to_eps", None)
    data_dir = getattr(args, "data_dir", None)
    specs, datasets = SPECS[args.name](p, data_dir, args)
    if to_eps and not getattr(args, "no_simulate", False):
        specs += S.simulated_specs(args.name, p, data_dir, datasets)
    if getattr(args, "no_live", False):
        specs = [s for s in specs if s.meta.get("bench_kind") == "simulated"]
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
    if args.name in ("table2", "contention", "noise", "decompose") or to_eps:
        from ...runlog import read_sweep
        from ..figures.plot import summary_markdown
        from ..summaries.records import sweep_summaries

        for summary in sweep_summaries(read_sweep(out), *_projection(args)).values():
            print()
            print(summary_markdown(summary))
    print(f"wrote {out}" + (f" ({len(failures)} of {len(specs)} runs failed)" if failures else ""))
    if failures:
        print(f"failed: {', '.join(failures)} (see bench_error in each run group)",
              file=sys.stderr, flush=True)
        return 1
    return 0

