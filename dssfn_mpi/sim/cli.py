"""``dssfn-mpi simulate``: its own flags and the command (train's settings come from config.py)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import require
from ..options import add_jitter_options, add_network_option, at_least

__all__ = ["SIM_SETTINGS", "add_simulate_arguments", "run_simulate"]

#: The TrainConfig settings that apply to a simulation (train's flags for them).
SIM_SETTINGS = frozenset({
    "dataset", "data_dir", "partition", "mode", "update", "topology", "degree", "edges", "layers",
    "hidden", "iters", "stop", "gamma", "eta", "relax", "rho", "norm_bound", "mix_rounds",
    "mix_tol", "max_lead", "metric", "seed", "slow", "out", "overwrite", "check", "evaluate",
    "save_model",
})


def add_simulate_arguments(g: Any) -> None:
    """The simulation's own flags: nodes, speed and network models, traced schedule."""
    g.add_argument("--nodes", type=at_least(2), metavar="M",
                   help="simulated nodes, >= 2 (required unless --schedule gives them)")
    g.add_argument("--speed", default="measured", metavar="MODEL",
                   help="compute time of an activation: measured (the simulator's own thread "
                   "CPU time, default), const:SECONDS, or trace:RUN.h5 (a traced run's "
                   "/trace/cpu, same M)")
    g.add_argument("--speeds", metavar="FRACTION:FACTOR,...",
                   help="heterogeneous classes: the first FRACTION of the nodes run FACTOR "
                   "times slower, then the next class, e.g. 0.5:2,0.5:1")
    add_jitter_options(g)
    add_network_option(g, "the network model of the messages and collectives")
    g.add_argument("--allreduce", choices=["mpich", "openmpi"], default=None,
                   help="whose allreduce algorithm sync's collective costs (default: the "
                   "trace's library with --speed trace:, else mpich)")
    g.add_argument("--schedule", metavar="RUN.h5",
                   help="re-execute a traced run: its settings and M, and (async) the neighbour "
                   "versions each activation read (/trace/versions)")


def _settings(args: argparse.Namespace):
    """The TrainConfig and M: from the command line, or from the traced run of --schedule."""
    from ..config import TrainConfig, config_from_args

    values = config_from_args(args)
    schedule = None
    if args.schedule is not None:
        from .layerloop import load_schedule

        cfg, nodes, versions = load_schedule(args.schedule)
        for key in ("out", "overwrite", "save_model", "check", "evaluate"):
            if key in values:
                setattr(cfg, key, values[key])
        cfg.out = values.get("out")
        cfg.save_model = values.get("save_model")
        require(args.nodes in (None, nodes),
                f"--nodes {args.nodes}: the scheduled run has {nodes} ranks")
        if cfg.algorithm.one_sided:
            schedule = (args.schedule, versions)
        return cfg, nodes, schedule
    require(args.nodes is not None, "simulate needs --nodes M (or --schedule RUN.h5)")
    return TrainConfig(**values), args.nodes, schedule


def run_simulate(args: argparse.Namespace, command_line: str) -> int:
    """Run ``dssfn-mpi simulate``; returns the exit status."""
    from ..analysis.network import allreduce_library, parse_network
    from .layerloop import SimOptions, simulate
    from .speed import SpeedModel

    network = parse_network(args.network)
    cfg, nodes, schedule = _settings(args)
    require(nodes >= 2, f"--nodes {nodes}: simulate needs at least 2 nodes")
    iters = 1 if cfg.algorithm.direct else cfg.iters  # one step: exchange and solve
    speed = SpeedModel.build(args.speed, nodes, cfg.layers + 1, iters, cfg.slow,
                             args.speeds, args.jitter, args.jitter_seed)
    library = args.allreduce
    if library is None:
        library = "mpich"
        if speed.trace is not None:
            from ..runlog import read_runlog

            library = allreduce_library(str(read_runlog(speed.trace.source).attrs.get(
                "mpi_library", "")))
    opts = SimOptions(nodes=nodes, speed=speed, network=network, allreduce=library,
                      schedule=schedule)
    result = simulate(cfg, opts, command_line, quiet=args.quiet)
    if cfg.out is not None and not args.quiet:
        print(f"wrote {cfg.out} (simulated seconds: "
              f"{result.attrs['sim_total_seconds']:.4f})", flush=True)
    return 0
