"""The options of the benchmark tools (``accuracy``, ``penalty``, ``activation``,
``links``): the same for ``dssfn-mpi bench NAME`` (:mod:`dssfn_mpi.bench.sweeps.parser`) and
``python -m`` of the tool's module (:func:`tool_parser`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ...options import add_network_option, at_least, positive, relaxation

__all__ = ["TOOLS", "TOOL_ARGS", "tool_parser"]

#: The tools: name and one-line help.
TOOLS = {
    "accuracy": "time to eps of live and simulated --stop eps runs, one figure and a table",
    "penalty": "serial ADMM penalty sweep behind the auto penalties (no MPI)",
    "activation": "one async activation and one sync iteration against their floors "
                  "(run under mpirun -n 17)",
    "links": "the replay's network model on rate-capped links between two emulated hosts "
             "(root)",
}


# The tools' options, here rather than in their modules so that building the command
# line imports none of them (their numerical imports take a second).

def _accuracy_args(ap: argparse.ArgumentParser) -> None:
    """The options of ``dssfn-mpi bench accuracy``."""
    ap.add_argument("--live", metavar="SWEEP.h5",
                    help="a bench straggler sweep run with --set stop=eps:E")
    ap.add_argument("--sim", nargs="*", default=[], metavar="RUN.h5",
                    help="simulated run logs (dssfn-mpi simulate --stop eps:E)")
    add_network_option(ap, "replay network of the live runs")
    ap.add_argument("--out", required=True, help="figure (.png; a .pdf and its points, .json, "
                    "are written beside it)")


def _penalty_args(parser: argparse.ArgumentParser) -> None:
    """The options of ``dssfn-mpi bench penalty``."""
    parser.add_argument("--dataset", default="digits", help="dataset of the layer problems")
    parser.add_argument("--layers", type=at_least(0), default=10, help="layers 0..L swept")
    parser.add_argument("--engine", default="sync",
                        help="consensus ADMM (sync), the async edge update (async), or with "
                        "--to-eps any mode that takes a penalty (--gamma or --rho: sync-graph, "
                        "lockstep, hood, hood-lockstep, hood-jacobi too); with --table a comma "
                        "list or all (every such mode)")
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
    parser.add_argument("--metric", choices=("identity", "gram"), default="identity",
                        help="with --to-eps: gram solves layer 0 in the Gram metric with its "
                        "auto penalty (train's default; --table then covers layers 0..L), "
                        "identity every layer with the scalar penalty")
    parser.add_argument("--relax", type=relaxation, default=None, metavar="ALPHA",
                        help="with --to-eps: every engine's relaxation (--relax of sync and "
                        "sync-graph, --eta of the others; default: each mode's own)")
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


#: Each tool's function declaring its options.
TOOL_ARGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "accuracy": _accuracy_args, "penalty": _penalty_args, "activation": _activation_args,
    "links": _links_args}


def tool_parser(module: str, description: str) -> argparse.ArgumentParser:
    """The parser of ``python -m MODULE`` (``dssfn_mpi.bench.micro.activation``, ...): the
    options of ``bench NAME``, NAME the module's last part."""
    from ...options import HelpFormatter

    parser = argparse.ArgumentParser(prog=f"python -m {module}",
                                     description=description, formatter_class=HelpFormatter)
    TOOL_ARGS[module.rpartition(".")[2]](parser)
    return parser
