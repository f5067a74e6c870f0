"""``dssfn-mpi bench NAME``: one subcommand per benchmark, each with its own options and help.

Each subcommand names the function that runs it (``set_defaults(bench_func=...)``,
called by :func:`dssfn_mpi.bench.run_bench`): the sweeps (``degree``, ``nodes``,
``table2``, ``straggler``, ``noise``, ``contention``) :func:`dssfn_mpi.bench.sweeps.command.run`,
``rma`` :func:`~dssfn_mpi.bench.sweeps.command.run_rma`, ``collect`` its module's
``run_collect``, the tools (``accuracy``, ``penalty``, ``activation``, ``links``)
their modules' ``run``, with their options declared in :mod:`dssfn_mpi.bench.sweeps.toolargs`
(the same options as ``python -m`` of the tool's module). The defaults that a preset
sets (swept values, modes) are listed per preset in each option's help, read
from :data:`dssfn_mpi.bench.sweeps.presets.PRESETS`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ...options import add_eps_option, add_network_option, at_least, positive
from .presets import PRESETS
from .toolargs import TOOL_ARGS, TOOLS

__all__ = ["SWEEPS", "TOOLS", "add_bench_parser"]

#: What each sweep's ``--values`` are.
SWEEPS = {
    "degree": "node degrees d of the circular graph",
    "nodes": "rank counts M",
    "table2": None,
    "straggler": "slow-down factors of the one slowed rank",
    "noise": "slow-down factors of the one slowed rank",
    "contention": "busy processes beside the job",
    "decompose": "node counts M (the first also on the complete graph, at every relaxation)",
}


_DESCRIPTIONS = {
    "degree": "Every mode at each node degree d of the circular graph, M fixed (paper fig. 2).",
    "nodes": "Every mode at each rank count M, ring topology (paper fig. 3).",
    "table2": "The paper's Table 2: test accuracy and time of every mode on each dataset "
              "whose files are found.",
    "straggler": "One rank slowed by each factor; async (bounded and unbounded delay) "
                 "against sync.",
    "noise": "Time to eps under noise on the circular graph (or --set topology=random-regular "
             "or exponential): every engine live (projected from its trace) and simulated, "
             "with per-activation jitter and one straggler.",
    "contention": "Every mode and wait policy with busy processes beside the job (a shared "
                  "machine).",
    "decompose": "Async's cost at equal accuracy split into graph, formulation and "
                 "asynchrony: each variant simulated on the ring, degree 8 and the complete "
                 "graph at each relaxation (--set relaxes=...).",
    "rma": "The one-sided micro-benchmark: put latency and bandwidth, passive progress, "
           "as 2-rank jobs.",
    "collect": "Gather run logs (e.g. the results of a Slurm array) into one sweep file.",
    "crossover": "Where asynchrony wins: the best synchronous against the best asynchronous "
                 "mode's simulated time to eps over graphs, node counts and noise, into one "
                 "summary (JSON) that resumes.",
}


def _by_preset(bench: str, field: str) -> str:
    """``quick: 2,4,5; mid: ...; paper: ...`` of a preset field."""
    def text(v: Any) -> str:
        items = v if isinstance(v, tuple) else (v,)
        return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in items)

    return "; ".join(f"{name}: {text(getattr(p, field))}" for name, p in PRESETS[bench].items())


def _common(p: argparse.ArgumentParser, data: bool = True) -> None:
    """Options of every sweep: preset, output, launcher, data folder, overrides.

    ``data=False`` (``rma``, which loads no dataset): ``--data-dir`` is accepted and
    unused, so that one command line serves every sweep.
    """
    p.add_argument("--preset", choices=["quick", "mid", "paper"], default="quick",
                   help="quick: tiny, for CI; mid: paper-width layers sized for a 2-core "
                   "machine (BENCHMARKS.md); paper: the paper's sizes")
    _output(p)
    p.add_argument("--launcher", help="command that starts MPI jobs, e.g. 'srun --mpi=pmix' "
                   "(default: the mpirun of this environment)")
    p.add_argument("--data-dir", help="folder with the public dataset files" if data else
                   "accepted like every sweep's, unused: this benchmark loads no dataset")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a preset field, e.g. --set layers=5 --set dataset=satimage "
                   "(repeatable; see benchmarks/README.md)")


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="sweep file (HDF5) to write; its folder is created "
                   "(required unless --dry-run)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")


def _jobs(p: argparse.ArgumentParser, bench: str) -> None:
    """Per-job options of the training sweeps, with each preset's swept values and modes."""
    if SWEEPS[bench] is not None:
        p.add_argument("--values", help=f"the swept {SWEEPS[bench]}, comma-separated "
                       f"(default, by preset: {_by_preset(bench, 'values')})")
    also = {"straggler": "; async-leadS also runs async with --max-lead S",
            "noise": "; MODE@ALPHA runs MODE relaxed by ALPHA"}.get(bench, "")
    p.add_argument("--modes", help="comma-separated modes to run (default, by preset: "
                   f"{_by_preset(bench, 'modes')}{also})")
    p.add_argument("--job-timeout", type=positive, metavar="SECONDS",
                   help="stop a configuration after this long (> 0) and record it as stopped, "
                   "with the layers it finished")
    add_network_option(p, "network of the projected dedicated-core times")
    add_eps_option(p, "of the projected time to eps")


def _eps_form(p: argparse.ArgumentParser, bench: str) -> None:
    """``--to-eps``: the sweep at equal accuracy, with the one-shot baseline and simulated
    runs."""
    sim = {"degree": "every degree at the same M",
           "nodes": f"M = {_by_preset('nodes', 'sim_values')} on the ring and each degree "
                    "of --set degrees=2,8,...",
           "table2": "every dataset at the same M and d"}[bench]
    p.add_argument("--to-eps", type=positive, metavar="EPS",
                   help="time-to-eps form: every layer (the input layer too) runs until every "
                   f"node is within EPS (> 0, e.g. 1e-2) of O*, K the cap (by preset: "
                   f"{_by_preset(bench, 'eps_iters')}); adds the one-shot baseline (oneshot, "
                   f"oneshot-graph) to the modes and simulated runs ({sim})")
    p.add_argument("--no-simulate", action="store_true",
                   help="with --to-eps: the live runs only")


def _add_sweep(sub: Any, name: str, **kw: Any) -> argparse.ArgumentParser:
    text = _DESCRIPTIONS[name].rstrip(".")
    p = sub.add_parser(name, help=text[0].lower() + text[1:],
                       description=_DESCRIPTIONS[name], **kw)
    p.set_defaults(inputs=[], bench_func=_RUN.get(name, _run_sweep))
    return p


def add_bench_parser(sub: Any, **kw: Any) -> argparse.ArgumentParser:
    """Add ``bench`` and its subcommands to the subparsers ``sub``.

    Parameters
    ----------
    sub
        The ``add_subparsers`` object of the ``dssfn-mpi`` parser.
    **kw
        Passed to every ``add_parser`` (formatter class, epilog).
    """
    p = sub.add_parser("bench", help="run a benchmark sweep into one HDF5 file, or a "
                       "benchmark tool", description="Run one benchmark; each configuration of "
                       "a sweep is a separate mpirun (or --launcher) job whose run log is "
                       "appended to --out. See dssfn-mpi bench NAME --help.", **kw)
    benches = p.add_subparsers(dest="name", required=True, metavar="NAME")
    for name in SWEEPS:
        b = _add_sweep(benches, name, **kw)
        _common(b)
        if name == "table2":
            b.add_argument("--datasets", help="comma-separated datasets (default, by preset: "
                           f"{_by_preset('table2', 'datasets')}; those whose files load)")
            b.add_argument("--seeds", type=at_least(1), help="repetitions with seeds 0..SEEDS-1 "
                           f"(default, by preset: {_by_preset('table2', 'seeds')})")
        if name in ("degree", "nodes", "table2"):
            _eps_form(b, name)
        if name in ("noise", "nodes"):
            b.add_argument("--no-live", action="store_true",
                           help="the simulated runs only (no MPI job)" + (
                               "; with --to-eps" if name == "nodes" else ""))
        _jobs(b, name)
    _common(_add_sweep(benches, "rma", **kw), data=False)
    c = _add_sweep(benches, "collect", **kw)
    c.add_argument("inputs", nargs="+", metavar="RUN.h5", help="the run logs to gather")
    _output(c)
    c.add_argument("--kind", choices=["degree", "nodes", "table2", "straggler"],
                   help="which benchmark the run logs belong to (default: guessed)")
    from .crossover import add_arguments as crossover_arguments

    crossover_arguments(_add_sweep(benches, "crossover", **kw))
    for name, text in TOOLS.items():
        t = benches.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".",
                               **kw)
        TOOL_ARGS[name](t)
        t.set_defaults(bench_func=_TOOLS[name])
    return p


# What runs each subcommand: a function per module, imported only when it runs.

def _run_sweep(args: argparse.Namespace) -> int:
    from .command import run

    return run(args)


def _run_rma(args: argparse.Namespace) -> int:
    from .command import run_rma

    return run_rma(args)


def _run_crossover(args: argparse.Namespace) -> int:
    from .crossover import run

    return run(args)


def _run_collect(args: argparse.Namespace) -> int:
    from .collect import run_collect

    return run_collect(args)


def _run_accuracy(args: argparse.Namespace) -> int:
    from ..figures.accuracy import run

    return run(args)


def _run_penalty(args: argparse.Namespace) -> int:
    from ..studies.penalty import run

    return run(args)


def _run_activation(args: argparse.Namespace) -> int:
    from ..micro.activation import run

    return run(args, "dssfn-mpi")


def _run_links(args: argparse.Namespace) -> int:
    from ..studies.links import run

    return run(args)


#: The subcommands other than the sweeps (which run :func:`_run_sweep`).
_RUN = {"rma": _run_rma, "collect": _run_collect, "crossover": _run_crossover}

#: Each tool's function running it (its options: :data:`~.toolargs.TOOL_ARGS`).
_TOOLS = {"accuracy": _run_accuracy, "penalty": _run_penalty, "activation": _run_activation,
          "links": _run_links}


