"""Command line: ``dssfn-mpi {train,simulate,evaluate,report,replay,doctor,data,bench,plot}``.

User errors print one line (``dssfn-mpi: error: ...``) from one rank and exit
with status 2; a problem found by one rank mid-run aborts the whole MPI job
so no rank waits forever; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os

# One BLAS thread per rank unless asked: with 20 ranks on 2 cores extra
# threads only fight each other. Must happen before numpy is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

from . import __version__  # noqa: E402
from .errors import EXIT_USER_ERROR, InjectedFailure, RankError, UserError  # noqa: E402
from .launch import launcher_size  # noqa: E402

PROG = "dssfn-mpi"

#: The thread level every command initialises MPI at, training and doctor alike.
#: The engines call MPI from the main thread only, while BLAS (and the stop
#: watcher of :mod:`dssfn_mpi.run.jobstop`) may run threads that never call MPI:
#: MPI_THREAD_FUNNELED. mpi4py's default, MULTIPLE, makes some MPI libraries
#: lock around every call for nothing.
MPI_THREAD_LEVEL = "funneled"


#: The exit statuses, in every command's ``--help``
#: (75 is :data:`dssfn_mpi.run.jobstop.EXIT_STOPPED`).
EXIT_STATUS_HELP = """exit status:
  0   done
  1   failure: a run, a check or a job failed (a bug prints its traceback)
  2   user error: a bad option, file or setting (one line on stderr, nothing written)
  75  stopped at the time limit (SIGTERM or SIGUSR1): train --resume RUN.h5 continues"""


def _command(sub: Any, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """A subcommand with its description, shown defaults and the exit statuses."""
    from .options import HelpFormatter

    return sub.add_parser(name, help=help, description=description,
                          formatter_class=HelpFormatter, epilog=EXIT_STATUS_HELP)


def _init_mpi() -> Any:
    """Import (and so initialise) MPI at :data:`MPI_THREAD_LEVEL`."""
    import mpi4py

    mpi4py.rc.thread_level = MPI_THREAD_LEVEL
    from mpi4py import MPI

    return MPI


def _mpi_world() -> Any | None:
    """COMM_WORLD if MPI was initialised by this process, else None."""
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None or not mod.Is_initialized() or mod.Is_finalized():
        return None
    return mod.COMM_WORLD


def _finish_user_error(message: str) -> None:
    """Print a collective user error once, then let every rank leave together.

    The launcher kills the job as soon as one rank exits non-zero, so rank 0
    must have printed before anyone exits; a bounded non-blocking barrier
    orders that without risking a hang if the error was not collective.
    """
    from .mailbox.waiting import sleep_until

    world = _mpi_world()
    if world is None and launcher_size() > 1:
        world = _init_mpi().COMM_WORLD
    if world is None or world.Get_rank() == 0:
        print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    if world is None or world.Get_size() == 1:
        return
    if not sleep_until(world.Ibarrier().Test, 30.0, max_delay=0.05).ready:
        _abort(world, EXIT_USER_ERROR)  # not every rank failed: end the job


def _add_train_args(p: argparse.ArgumentParser) -> None:
    """Every TrainConfig setting (declared once, in config.py) plus the command's own flags."""
    from .config import add_train_arguments

    groups = add_train_arguments(p)
    groups["method"].add_argument("--config",
                                  help="JSON or TOML file with any of these settings")
    g = groups["output"]
    g.add_argument("--quiet", action="store_true", help="no per-layer progress lines")
    g.add_argument("--resume", metavar="RUN.h5",
                   help="continue an interrupted run from its checkpoints (same rank count; "
                   "its saved settings are used)")


class _Parser(argparse.ArgumentParser):
    """Bad command lines get one line on stderr (from one rank under mpirun), exit 2.

    argparse's own error prints the whole usage block first, once per rank.
    Under a launcher the ranks leave together (:func:`_finish_user_error`, which
    starts MPI for it): a rank that exited at once could get the job killed
    before rank 0 had written its line.
    """

    def error(self, message: str) -> Any:
        line = f"{message} (see {self.prog} --help)"
        if launcher_size() > 1:
            _finish_user_error(line)
        else:
            sys.stderr.write(f"{PROG}: error: {line}\n")
        sys.exit(EXIT_USER_ERROR)


def _add_projection_arguments(p: argparse.ArgumentParser) -> None:
    """``--network`` and ``--eps`` of the projected times in plots."""
    from .options import add_eps_option, add_network_option

    add_network_option(p, "network of the projected dedicated-core times")
    add_eps_option(p, "of the projected time to eps")


def _add_train_parser(sub: Any) -> None:
    p = _command(sub, "train", "train with one MPI rank per graph node",
                 "Train SSFN layer by layer; run under mpirun -n M.")
    _add_train_args(p)
    p.set_defaults(func=_cmd_train)


def _add_simulate_parser(sub: Any) -> None:
    from .config import TrainConfig
    from .options import add_arguments
    from .sim.cli import SIM_SETTINGS, add_simulate_arguments

    p = _command(sub, "simulate", "run the engines' arithmetic for M nodes in one process, in "
                 "simulated time (docs/SIMULATE.md)",
                 "Simulate a decentralized run: every node's updates are the engines' own, the "
                 "time is simulated under a speed and a network model (docs/SIMULATE.md). No "
                 "MPI.")
    groups = add_arguments(p, TrainConfig, only=SIM_SETTINGS)
    add_simulate_arguments(groups.setdefault("simulation", p.add_argument_group("simulation")))
    groups["output"].add_argument("--quiet", action="store_true",
                                  help="no per-layer progress lines")
    p.set_defaults(func=_cmd_simulate)


def _add_evaluate_parser(sub: Any) -> None:
    from .options import at_least

    p = _command(sub, "evaluate", "score a model saved with train --save-model",
                 "Score every node's model of every layer, saved with train --save-model, on "
                 "a dataset's test split: min, mean and max test accuracy over the nodes per "
                 "layer. One process, no MPI.")
    p.add_argument("model", help="MODEL.h5")
    p.add_argument("--dataset", required=True, help="dataset to score it on")
    p.add_argument("--data-dir", help="folder with the public dataset files")
    p.add_argument("--seed", type=at_least(0), default=None,
                   help="split seed of the dataset, >= 0 (default: the model's)")
    p.set_defaults(func=_cmd_evaluate)


def _add_report_parser(sub: Any) -> None:
    from .options import RenamedFlag, add_network_option

    p = _command(sub, "report", "print the summary table of a run log",
                 "Summarise a run log (or each run of a sweep file): its settings, what it "
                 "measured about MPI (the one-sided write path, passive puts), and per layer "
                 "the times, the distance to the exact solution and the accuracies. With "
                 "--network, also the run projected onto one core per rank (as replay).")
    p.add_argument("runlog", help="RUN.h5 written by train (or a sweep file)")
    add_network_option(p, "also give the projected dedicated-core time on this network",
                       default=None)
    p.add_argument("--replay", dest="network", action=RenamedFlag, new="--network",
                   help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_report)


def _add_replay_parser(sub: Any) -> None:
    from .options import (
        RenamedFlag,
        add_eps_option,
        add_jitter_options,
        add_network_option,
        at_least,
    )

    p = _command(sub, "replay", "project a traced run onto one core per rank",
                 "The dedicated-core timeline of a run from its trace: each rank on its own "
                 "core, messages over a network of latency alpha and bandwidth beta, by the "
                 "engines' own rules (docs/REPLAY.md).")
    p.add_argument("runlog", help="RUN.h5 written by train (or a sweep file with --run)")
    add_network_option(p, "the network of the projection")
    p.add_argument("--slow", action="append", metavar="RANK:FACTOR",
                   help="that rank's activations take FACTOR times their traced CPU time, as "
                   "under train --slow (repeatable)")
    add_jitter_options(p)
    p.add_argument("--seed", dest="jitter_seed", type=at_least(0), action=RenamedFlag,
                   new="--jitter-seed", help=argparse.SUPPRESS)
    add_eps_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--run", metavar="NAME", help="the run of a sweep file to replay")
    p.set_defaults(func=_cmd_replay)


def _add_doctor_parser(sub: Any) -> None:
    p = _command(sub, "doctor", "check the MPI set-up (run under mpirun -n 2)",
                 "Check the MPI set-up before training: run it under mpirun -n 2 (or srun -n 2 "
                 "across two nodes). It prints the MPI library, thread level, one-sided "
                 "component and window model, BLAS threads and placement, and tests that a "
                 "put into a window completes while its target computes outside MPI (passive "
                 "progress, which the async engine needs); exit 1 if it does not.")
    p.add_argument("--json", action="store_true", help="print one JSON object (rank 0)")
    p.set_defaults(func=_cmd_doctor)


def _add_plot_parser(sub: Any) -> None:
    p = _command(sub, "plot", "draw the figures of a benchmark or run file",
                 "Draw every figure of a sweep file written by bench (or of its summary, a run "
                 "log or an RMA file) as PNG and PDF, with Markdown summary tables and the "
                 "sweep's summary (<bench>.json): measured against projected dedicated-core "
                 "time, time to eps, and (on traced sweeps) the jitter view. --all redraws "
                 "every published figure from the committed data (results/data) and "
                 "regenerates the results page's tables; --add records a data file there. "
                 "Needs matplotlib (pip install 'dssfn-mpi[plot]').")
    p.add_argument("file", nargs="?", help="HDF5 file written by bench or train, or a sweep "
                   "summary (.json) written by plot")
    p.add_argument("--out", help="folder for the PNG and PDF figures (default: figures; "
                   "with --all: docs/figures)")
    _add_projection_arguments(p)
    g = p.add_argument_group("committed result data")
    g.add_argument("--all", action="store_true", help="redraw every figure listed in the data "
                   "folder's MANIFEST.json and regenerate the page's marked tables")
    g.add_argument("--check", action="store_true", help="with --all: write nothing; exit 1 "
                   "if a marked table of the page is not what the data give")
    g.add_argument("--add", metavar="FILE", help="copy a sweep summary, the one-shot cost "
                   "JSON or an RMA file into the data folder and record it in the manifest")
    g.add_argument("--made-by", metavar="COMMAND", help="with --add: the command that made "
                   "the data (for a summary: its bench command)")
    g.add_argument("--figures", metavar="STEM[=NAME],...", default="",
                   help="with --add: the figures drawn from it that are published, each "
                   "under NAME in docs/figures (default: its own stem)")
    g.add_argument("--machine-note", metavar="TEXT", help="with --add: what else ran on "
                   "the machine while the data were made (e.g. 'quiet'), kept in the manifest")
    g.add_argument("--name", help="with --add: its file name in the data folder (default: "
                   "its own, e.g. table2_L20.json for a second table2.json)")
    g.add_argument("--data", default="results/data", help="the data folder (default "
                   "results/data)")
    g.add_argument("--page", nargs="+", default=None, metavar="PAGE",
                   help="with --all: the pages whose marked tables and texts are regenerated "
                   "(default: BENCHMARKS.md, README.md and the reference pages with "
                   "generated tables)")
    p.set_defaults(func=_cmd_plot)


def _add_data_parser(sub: Any) -> None:
    p = _command(sub, "data", "list, verify or download the public datasets",
                 "list: each dataset's state (present, verified); verify: check files against "
                 "their published sha256 (exit 1 if any is bad); fetch: download, verify and "
                 "put them where train looks.")
    p.add_argument("action", choices=["list", "verify", "fetch"])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="dataset names (fetch: at least one; list, verify: default all)")
    p.add_argument("--dest", help="download folder (fetch; default: $DSSFN_DATA_DIR, else "
                   "$XDG_DATA_HOME/dssfn-mpi, i.e. ~/.local/share/dssfn-mpi)")
    p.add_argument("--data-dir", help="folder to look in (list, verify; default: as train)")
    p.add_argument("--json", action="store_true", help="list: print one JSON object")
    p.set_defaults(func=_cmd_data)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand.

    Each is declared by its ``_add_*_parser``, which also names the function that runs
    it (``set_defaults(func=...)``: ``func(args, argv)`` returns the exit status).
    """
    from .bench.sweeps.parser import add_bench_parser
    from .options import HelpFormatter

    parser = _Parser(
        prog=PROG,
        description="Asynchronous decentralized SSFN on MPI (Liang et al., ICASSP 2020).",
        formatter_class=HelpFormatter, epilog=EXIT_STATUS_HELP,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_train_parser(sub)
    _add_simulate_parser(sub)
    _add_evaluate_parser(sub)
    _add_report_parser(sub)
    _add_replay_parser(sub)
    _add_doctor_parser(sub)
    add_bench_parser(sub, formatter_class=HelpFormatter,
                     epilog=EXIT_STATUS_HELP).set_defaults(func=_cmd_bench)
    _add_plot_parser(sub)
    _add_data_parser(sub)
    return parser


def _train_config(args: argparse.Namespace):
    """The run's settings: config file, then the command line over it, then the preset."""
    from .config import TrainConfig, apply_preset, config_from_args, load_config_file

    if args.resume:
        return _resume_config(args)
    values: dict[str, Any] = load_config_file(args.config) if args.config else {}
    values.update(config_from_args(args))
    cfg = TrainConfig(**values)
    apply_preset(cfg, explicit=set(values))
    return cfg


def _resume_config(args: argparse.Namespace):
    """Settings of the run to resume; only --timeout, --quiet and --fail-at may change."""
    from .config import TrainConfig, config_from_mapping, parse_fail_at
    from .run.checkpoint import load_config

    saved, _ = load_config(args.resume)
    values = config_from_mapping(saved, f"checkpoint of {args.resume}")
    values.update(out=args.resume, overwrite=True, fail_at=parse_fail_at(args.fail_at))
    if args.timeout is not None:
        values["timeout"] = args.timeout
    return TrainConfig(**values)


def _cmd_train(args: argparse.Namespace, argv: list[str]) -> int:
    cfg = _train_config(args)
    from .run.jobstop import StopWatcher

    command_line = shlex.join([PROG, *argv])
    # Before MPI starts, so that MPI's threads inherit the blocked stop signals.
    watcher = StopWatcher(cfg.out, command_line, PROG)
    watcher.start()
    MPI = _init_mpi()
    watcher.set_rank(MPI.COMM_WORLD.Get_rank())
    from threadpoolctl import threadpool_limits

    from .run.train import run_training

    limit = int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    with threadpool_limits(limits=limit):
        result = run_training(cfg, MPI.COMM_WORLD, command_line=command_line,
                              quiet=args.quiet, resume=bool(args.resume))
    if result is not None and cfg.out is not None and not args.quiet:
        print(f"wrote {cfg.out}", flush=True)
    return 0


def _cmd_simulate(args: argparse.Namespace, argv: list[str]) -> int:
    from .sim.cli import run_simulate

    return run_simulate(args, shlex.join([PROG, *argv]))


def _cmd_bench(args: argparse.Namespace, argv: list[str]) -> int:
    from .bench import run_bench

    return run_bench(args)


def _cmd_evaluate(args: argparse.Namespace, argv: list[str]) -> int:
    from .datasets import load_dataset
    from .ssfn.modelio import evaluate_model, load_model

    model = load_model(args.model)
    seed = int(model.attrs["seed"]) if args.seed is None else args.seed
    acc = evaluate_model(model, load_dataset(args.dataset, args.data_dir, seed=seed))
    print(f"{args.model}: {acc.shape[1]} nodes, layers 0..{acc.shape[0] - 1}, "
          f"test accuracy on {args.dataset} (%)")
    print(f"{'layer':>5} {'min':>7} {'mean':>7} {'max':>7}")
    for layer, row in enumerate(acc):
        print(f"{layer:>5} {100 * row.min():7.2f} {100 * row.mean():7.2f} {100 * row.max():7.2f}")
    return 0


def _cmd_report(args: argparse.Namespace, argv: list[str]) -> int:
    from .analysis.report import format_report

    network = None
    if args.network is not None:
        from .analysis.replay import parse_network

        network = parse_network(args.network)
    if args.json:
        import json

        from .analysis.report import report_json

        print(json.dumps(report_json(args.runlog, network)))
        return 0
    text = format_report(args.runlog)
    if network is not None:  # computed before anything is printed
        from .analysis.replay import report_projection

        text += "\n\n" + report_projection(args.runlog, network)
    print(text)
    return 0


def _cmd_replay(args: argparse.Namespace, argv: list[str]) -> int:
    import json

    from .analysis.replay import format_projection, load_run, parse_jitter, parse_network, project
    from .config import parse_slow

    network = parse_network(args.network)
    slow = parse_slow(args.slow)
    jitter = parse_jitter(args.jitter) if args.jitter is not None else None
    run = load_run(args.runlog, args.run)
    proj = project(run, network, slow=slow, jitter=jitter, seed=args.jitter_seed, eps=args.eps)
    if args.json:
        print(json.dumps(proj.to_json()))
        return 0
    options = [f"slow {r}:{f:g}" for r, f in sorted(slow.items())]
    if jitter is not None:
        options.append(f"jitter {args.jitter} (seed {args.jitter_seed})")
    print(format_projection(proj, run, args.eps, ", ".join(options)))
    return 0


def _cmd_doctor(args: argparse.Namespace, argv: list[str]) -> int:
    """Print the report; exit 1 (every rank) when puts are not passive here."""
    MPI = _init_mpi()

    from .run.doctor import doctor_json, doctor_report, mpi_facts, passive_put_ok

    comm = MPI.COMM_WORLD
    facts = mpi_facts(comm, sleep=1.0)
    if args.json:
        import json

        obj = doctor_json(comm, facts)
        if obj is not None:
            print(json.dumps(obj), flush=True)
    else:
        text = doctor_report(comm, facts)
        if text:
            print(text, flush=True)
    if passive_put_ok(facts):
        return 0
    if facts["mpi_passive_put"] == "undecided":
        if comm.Get_rank() == 0:
            print(f"{PROG}: error: the passive-put check could not decide (the put never ran "
                  "while its target slept: the machine is too loaded); run doctor again",
                  file=sys.stderr, flush=True)
        return 1
    if comm.Get_rank() == 0:
        print(f"{PROG}: error: puts into MPI-allocated windows are not passive with this MPI "
              f"(one-sided component: {facts['mpi_osc']}): the async engine would stall and "
              "its timings would be wrong; see docs/MPI.md", file=sys.stderr, flush=True)
    return 1


def _cmd_data(args: argparse.Namespace, argv: list[str]) -> int:
    from .datasets.command import data_fetch, data_list, data_verify

    if args.json and args.action != "list":
        raise UserError(f"--json is for data list (data {args.action} prints no JSON)")
    if args.action == "list":
        return data_list(args.names, args.data_dir, as_json=args.json)
    if args.action == "verify":
        return data_verify(args.names, args.data_dir)
    return data_fetch(args.names, args.dest)


def _cmd_plot(args: argparse.Namespace, argv: list[str]) -> int:
    try:
        from .bench.figures.plot import plot_file  # noqa: F401  (matplotlib present?)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "matplotlib":
            raise  # something else is broken: a bug, keep its traceback
        raise UserError("plot needs matplotlib, which is not installed: install the [plot] "
                        "extra, pip install 'dssfn-mpi[plot]' (in a checkout: "
                        "pip install -e '.[plot]')") from None
    return _plot_action(args)


def _plot_action(args: argparse.Namespace) -> int:
    """What ``plot`` was asked: one file, ``--all`` or ``--add``."""
    from .bench.pages import resultsdir

    if args.all:
        if args.file or args.add:
            raise UserError("plot --all takes no FILE and no --add")
        pages = resultsdir.PAGES if args.page is None else args.page
        return resultsdir.rebuild(args.data, args.out or "docs/figures", pages, args.check)
    if args.add:
        if not args.made_by:
            raise UserError("plot --add FILE needs --made-by 'COMMAND' (the command that made "
                            "the data)")
        figures = dict(f.partition("=")[::2] for f in args.figures.split(",") if f)
        path = resultsdir.add_file(args.data, args.add, args.made_by,
                                   {k: v or k for k, v in figures.items()}, args.name,
                                   args.machine_note)
        print(f"{path} recorded in {os.path.join(args.data, resultsdir.MANIFEST)}")
        return 0
    if not args.file:
        raise UserError("plot needs a FILE, --all or --add FILE")
    from .bench.figures.plot import plot_file

    for path in plot_file(args.file, args.out or "figures", args.network, args.eps):
        print(path)
    return 0


#: Exit status when the reader of stdout went away (``dssfn-mpi data list | head -1``):
#: what a program killed by SIGPIPE reports (128 + 13), as the shell's own tools do.
EXIT_BROKEN_PIPE = 141


def _stdout_closed() -> int:
    """The reader of stdout is gone: no traceback, no further output, end the job."""
    # Python flushes stdout again at exit; pointing it at /dev/null keeps that quiet.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout without a file descriptor: nothing to silence
        pass
    world = _mpi_world()
    if world is not None and world.Get_size() > 1:
        world.Abort(EXIT_BROKEN_PIPE)
    return EXIT_BROKEN_PIPE


#: Seconds MPI_Abort may take before the rank ends itself: on a host cut off from the
#: rest of the job, Abort cannot reach the launcher and would spin for ever.
ABORT_GRACE = 5.0


def _abort(world: Any, code: int) -> None:
    """``MPI_Abort`` the job; end this process anyway if Abort has not after a while."""
    import threading

    timer = threading.Timer(ABORT_GRACE, os._exit, (code,))
    timer.daemon = True
    timer.start()
    world.Abort(code)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``dssfn-mpi`` and ``python -m dssfn_mpi``; returns the exit status.

    A closed stdout (``dssfn-mpi data list | head -1``) ends any command quietly
    with :data:`EXIT_BROKEN_PIPE`.
    """
    try:
        try:
            return _run(argv)
        finally:
            # Buffered output meets the closed pipe here at the latest, not at exit.
            sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run the command; user errors and failures become exit statuses."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        return args.func(args, argv)
    except RankError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        world = _mpi_world()
        if world is not None and world.Get_size() > 1:
            _abort(world, EXIT_USER_ERROR)
        return EXIT_USER_ERROR
    except UserError as exc:
        # Validation runs identically on every rank: one of them speaks.
        _finish_user_error(str(exc))
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # main() handles it, for every command
    except Exception as exc:
        world = _mpi_world()
        where = f"rank {world.Get_rank()}: " if world is not None else ""
        if not isinstance(exc, InjectedFailure):  # a test's planned failure needs no trace
            traceback.print_exc()
        print(f"{PROG}: {where}failed: {exc}; aborting the job", file=sys.stderr, flush=True)
        if world is not None and world.Get_size() > 1:
            _abort(world, 1)
        return 1


if __name__ == "__main__":
    sys.exit(main())
