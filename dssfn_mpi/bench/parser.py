"""``dssfn-mpi bench NAME``: one subcommand per benchmark, each with its own options and help.

Each subcommand names the function that runs it (``set_defaults(bench_func=...)``,
called by :func:`dssfn_mpi.bench.run_bench`): the sweeps (``degree``, ``nodes``,
``table2``, ``straggler``, ``noise``, ``contention``) :func:`dssfn_mpi.bench.command.run`,
``rma`` :func:`~dssfn_mpi.bench.command.run_rma`, ``collect`` its module's
``run_collect``, the tools (``accuracy``, ``penalty``, ``activation``, ``links``)
their modules' ``run``, with their options declared here (:func:`tool_parser`: the
same options as ``python -m dssfn_mpi.bench.NAME``). The defaults that a preset
sets (swept values, modes) are listed per preset in each option's help, read
from :data:`dssfn_mpi.bench.presets.PRESETS`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..options import at_least, positive
from .presets import PRESETS

__all__ = ["SWEEPS", "TOOLS", "add_bench_parser", "tool_parser"]

#: What each sweep's ``--values`` are.
SWEEPS = {
    "degree": "node degrees d of the circular graph",
    "nodes": "rank counts M",
    "table2": None,
    "straggler": "slow-down factors of the one slowed rank",
    "noise": "slow-down factors of the one slowed rank",
    "contention": "busy processes beside the job",
}

#: The tools: module under dssfn_mpi.bench and its one-line help.
TOOLS = {
    "accuracy": "time to eps of live and simulated --stop eps runs, one figure and a table",
    "penalty": "serial ADMM penalty sweep behind the auto penalties (no MPI)",
    "activation": "one async activation and one sync iteration against their floors "
                  "(run under mpirun -n 17)",
    "links": "the replay's network model on rate-capped links between two emulated hosts "
             "(root)",
}

_DESCRIPTIONS = {
    "degree": "Every mode at each node degree d of the circular graph, M fixed (paper fig. 2).",
    "nodes": "Every mode at each rank count M, ring topology (paper fig. 3).",
    "table2": "The paper's Table 2: test accuracy and time of every mode on each dataset "
              "whose files are found.",
    "straggler": "One rank slowed by each factor; async (bounded and unbounded delay) "
                 "against sync.",
    "noise": "Time to eps under noise on the circular graph: every engine live (projected "
             "from its trace) and simulated, with per-activation jitter and one straggler.",
    "contention": "Every mode and wait policy with busy processes beside the job (a shared "
                  "machine).",
    "rma": "The one-sided micro-benchmark: put latency and bandwidth, passive progress, "
           "as 2-rank jobs.",
    "collect": "Gather run logs (e.g. the results of a Slurm array) into one sweep file.",
}


def _by_preset(bench: str, field: str) -> str:
    """``quick: 2,4,5; mid: ...; paper: ...`` of a preset field."""
    def text(v: Any) -> str:
        items = v if isinstance(v, tuple) else (v,)
        return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in items)

    return "; ".join(f"{name}: {text(getattr(p, field))}" for name, p in PRESETS[bench].items())


def _common(p: argparse.ArgumentParser, data: bool = True) -> None:
    """Options of every sweep: preset, output, launcher, overrides."""
    p.add_argument("--preset", choices=["quick", "mid", "paper"], default="quick",
                   help="quick: tiny, for CI; mid: paper-width layers sized for a 2-core "
                   "machine (BENCHMARKS.md); paper: the paper's sizes")
    _output(p)
    p.add_argument("--launcher", help="command that starts MPI jobs, e.g. 'srun --mpi=pmix' "
                   "(default: the mpirun of this environment)")
    if data:
        p.add_argument("--data-dir", help="folder with the public dataset files")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a preset field, e.g. --set layers=5 --set dataset=satimage "
                   "(repeatable; see BENCHMARKS.md)")


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
    also = "; async-leadS also runs async with --max-lead S" if bench == "straggler" else ""
    p.add_argument("--modes", help="comma-separated modes to run (default, by preset: "
                   f"{_by_preset(bench, 'modes')}{also})")
    p.add_argument("--job-timeout", type=positive, metavar="SECONDS",
                   help="kill a configuration after this long (> 0) and record it as failed")
    p.add_argument("--network", default="shm", metavar="NAME",
                   help="network of the projected dedicated-core times: shm, ib, eth10 or "
                   "alpha=SECONDS,beta=BYTES_PER_S (see dssfn-mpi replay)")
    p.add_argument("--eps", type=positive, default=1e-2,
                   help="target relative distance to O* of the projected time to eps (> 0)")


def _eps_form(p: argparse.ArgumentParser, bench: str) -> None:
    """``--to-eps``: the sweep at equal accuracy, with the one-shot baseline and simulated
    runs."""
    sim = {"degree": "every degree at the same M",
           "nodes": f"the ring at M = {_by_preset('nodes', 'sim_values')}",
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
        _jobs(b, name)
    _common(_add_sweep(benches, "rma", **kw), data=False)
    c = _add_sweep(benches, "collect", **kw)
    c.add_argument("inputs", nargs="+", metavar="RUN.h5", help="the run logs to gather")
    _output(c)
    c.add_argument("--kind", choices=["degree", "nodes", "table2", "straggler"],
                   help="which benchmark the run logs belong to (default: guessed)")
    for name, text in TOOLS.items():
        t = benches.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".",
                               **kw)
        add_args, run = _TOOLS[name]
        add_args(t)
        t.set_defaults(bench_func=run)
    return p


# The tools' options, here rather than in their modules so that building the command
# line imports none of them (their numerical imports take a second).

def _accuracy_args(ap: argparse.ArgumentParser) -> None:
    """The options of ``dssfn-mpi bench accuracy``."""
    ap.add_argument("--live", metavar="SWEEP.h5",
                    help="a bench straggler sweep run with --set stop=eps:E")
    ap.add_argument("--sim", nargs="*", default=[], metavar="RUN.h5",
                    help="simulated run logs (dssfn-mpi simulate --stop eps:E)")
    ap.add_argument("--network", default="shm",
                    help="replay network of the live runs: shm, ib, eth10 or "
                    "alpha=SECONDS,beta=BYTES_PER_S")
    ap.add_argument("--out", required=True, help="figure (.png; a .pdf and its points, .json, "
                    "are written beside it)")


def _penalty_args(parser: argparse.ArgumentParser) -> None:
    """The options of ``dssfn-mpi bench penalty``."""
    parser.add_argument("--dataset", default="digits", help="dataset of the layer problems")
    parser.add_argument("--layers", type=at_least(0), default=10, help="layers 0..L swept")
    parser.add_argument("--engine", default="sync",
                        help="consensus ADMM (sync), the async edge update (async), or with "
                        "--to-eps also sync-graph; with --table a comma list or all")
    parser.add_argument("--nodes", type=at_least(2), default=20, help="nodes M, >= 2")
    parser.add_argument("--degree", type=at_least(1), default=None,
                        help="of the circular graph (default 8; --to-eps: its topology's "
                        "default)")
    parser.add_argument("--topology", default="circular", help="graph of --to-eps (only)")
    parser.add_argument("--iters", type=at_least(1), default=200,
                        help="K, >= 1; with --to-eps the cap of each layer")
    parser.add_argument("--powers", default="-2,-1,0,1,2,3",
                        help="penalty = auto x 2^k for these integers k")
    parser.add_argument("--to-eps", type=positive, default=None, metavar="TOL",
                        help="count activations to TOL (> 0) in the simulator instead")
    parser.add_argument("--table", default=None, metavar="GRAPHS",
                        help="with --to-eps: the auto penalty against the best multiplier "
                        "at layers 1..L, one markdown row per engine, graph, dataset and "
                        "layer; GRAPHS is a comma list of TOPOLOGY:M[:DEGREE] or all "
                        "(ring:4,ring:20,circular:20:8,complete:8,random-regular:16:3); "
                        "--dataset and --engine may then be comma lists")


def _activation_args(parser: argparse.ArgumentParser) -> None:
    """The options of ``dssfn-mpi bench activation``."""
    parser.add_argument("--out", help="HDF5 file to write (rank 0); none: print only")
    parser.add_argument("--reps", type=at_least(1), default=200, help="repetitions per degree")
    parser.add_argument("--degrees", default="1,2,4,8,16", help="neighbour counts")
    parser.add_argument("--classes", type=at_least(1), default=10, help="Q (10: mnist)")
    parser.add_argument("--width", type=at_least(1), help="layer width n (default 2Q + 1000)")
    parser.add_argument("--numpy", action="store_true",
                        help="the activation's numpy path instead of its compiled loops")
    parser.add_argument("--rma", choices=("auto", "put"), default="auto",
                        help="the mailbox's write path, as train --rma: auto (plain stores into "
                        "a shared window where possible) or put (MPI_Put); the file records "
                        "which was measured (write_path)")
    parser.add_argument("--samples", type=at_least(1), default=3000,
                        help="samples of the local inverse (3000: mnist over 20 nodes)")
    parser.add_argument("--label", help="group name under /activation (default: "
                                        "osc-$OMPI_MCA_osc, -put with --rma put)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")


def _links_args(parser: argparse.ArgumentParser) -> None:
    """The actions and options of ``dssfn-mpi bench links``."""
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="{run,table}")
    run = sub.add_parser("run", help="measure (root: creates two network namespaces)",
                         description="Measure; as root (it creates two network namespaces).",
                         formatter_class=parser.formatter_class)
    run.add_argument("--out", required=True, help="folder for the files")
    run.add_argument("--rates", default="10gbit,1gbit,100mbit", help="link rates")
    run.add_argument("--reps", type=at_least(1), default=10, help="RMA benchmark repetitions")
    run.add_argument("--passes", type=at_least(1), default=1, help="repeat everything")
    run.add_argument("--progress-thread", action="store_true",
                     help="Open MPI's TCP progress thread on (OMPI_MCA_btl_tcp_progress_thread=1)")
    run.add_argument("--job-timeout", type=positive, default=900.0, help="seconds per job")
    table = sub.add_parser("table", help="replay the runs of a folder; print the table",
                           description="Replay the runs of a folder; print the table.",
                           formatter_class=parser.formatter_class)
    table.add_argument("folder", help="a folder written by run")


# What runs each subcommand: a function per module, imported only when it runs.

def _run_sweep(args: argparse.Namespace) -> int:
    from .command import run

    return run(args)


def _run_rma(args: argparse.Namespace) -> int:
    from .command import run_rma

    return run_rma(args)


def _run_collect(args: argparse.Namespace) -> int:
    from .collect import run_collect

    return run_collect(args)


def _run_accuracy(args: argparse.Namespace) -> int:
    from .accuracy import run

    return run(args)


def _run_penalty(args: argparse.Namespace) -> int:
    from .penalty import run

    return run(args)


def _run_activation(args: argparse.Namespace) -> int:
    from .activation import run

    return run(args, "dssfn-mpi")


def _run_links(args: argparse.Namespace) -> int:
    from .links import run

    return run(args)


#: The subcommands other than the sweeps (which run :func:`_run_sweep`).
_RUN = {"rma": _run_rma, "collect": _run_collect}

#: Each tool: the function declaring its options, the function running it.
_TOOLS = {"accuracy": (_accuracy_args, _run_accuracy), "penalty": (_penalty_args, _run_penalty),
          "activation": (_activation_args, _run_activation), "links": (_links_args, _run_links)}


def tool_parser(name: str, description: str) -> argparse.ArgumentParser:
    """The parser of ``python -m dssfn_mpi.bench.NAME``: the options of ``bench NAME``."""
    from ..options import HelpFormatter

    parser = argparse.ArgumentParser(prog=f"python -m dssfn_mpi.bench.{name}",
                                     description=description, formatter_class=HelpFormatter)
    _TOOLS[name][0](parser)
    return parser
