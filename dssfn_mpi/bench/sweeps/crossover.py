"""``bench crossover``: where asynchrony wins, over graphs, node counts and noise.

Every case is one simulated run (``dssfn-mpi simulate``, one process, simulated time:
each activation's measured thread CPU time plus the network model) of one mode on one
graph at one node count M under one kind of noise, every layer until every node is within
eps of the exact solution (``--stop eps:E --no-eval``) or the cap of K activations
(iterations) per node and layer. Every engine runs at its default relaxation (no
``--relax``, no ``--eta``).

The cases, in the order they run (:func:`case_list`): per network, per M (ascending), first
the noise cases of :data:`FIRST_NOISES` for every graph and mode, then the other noise
cases. Each runs as a subprocess with a wall timeout; its run log is reduced to one record
(:func:`case_record`: the sweep summary's record of
:func:`~dssfn_mpi.bench.summaries.records.run_record`, with each layer's simulated time and
eps state, the graph's facts and the simulation's own CPU and wall time) and the summary
file is rewritten after every case. A case already in the file is skipped, so an
interrupted sweep resumes where it stopped and a finished one takes more cases (other
modes, M, noise, networks); a failed or timed-out case is recorded and the sweep goes on
(``--redo failed,capped`` runs those again).

The ratios and the table are :mod:`dssfn_mpi.bench.summaries.crossratio`'s, the figure
:mod:`dssfn_mpi.bench.figures.crossoverfig`'s.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ...analysis.network import NETWORKS
from ...errors import UserError, require
from .presets import topology_args

__all__ = ["FIRST_NOISES", "GRAPHS", "MODES", "NOISES", "PRESETS", "Case",
           "CrossoverPreset", "add_arguments", "case_list", "case_record", "run"]

#: The graphs: name -> ``simulate`` topology arguments at M nodes (the degree is at most
#: M - 1; the run log records the degree used).
GRAPHS: dict[str, Any] = {
    "circular-d8": lambda M: topology_args("circular", min(8, M - 1)),
    "random-regular-d8": lambda M: topology_args("random-regular", min(8, M - 1)),
    "exponential": lambda M: topology_args("exponential", 0),
}

#: The noise cases: name -> ``simulate`` arguments (jitter seeded 0).
NOISES: dict[str, tuple[str, ...]] = {
    "none": (),
    "exp:0.25": ("--jitter", "exp:0.25", "--jitter-seed", "0"),
    "exp:1.0": ("--jitter", "exp:1.0", "--jitter-seed", "0"),
    "lognormal:0.5": ("--jitter", "lognormal:0.5", "--jitter-seed", "0"),
    "slow:10": ("--slow", "0:10"),
    "speeds:0.1x3": ("--speeds", "0.1:3,0.9:1"),
}

#: The noise cases run first at every M, for every graph and mode.
FIRST_NOISES = ("none", "exp:1.0")

#: The modes run by default (each checked against the algorithm registry).
MODES = ("sync", "sync-graph", "lockstep", "oneshot", "async")

@dataclass(frozen=True)
class CrossoverPreset:
    """The sizes of one crossover sweep.

    Attributes
    ----------
    dataset : str
        The dataset every case trains on.
    layers : int
        L: layers 0..L are solved.
    nodes : tuple of int
        The node counts M, run in this order.
    cap : int
        K, the cap of activations (iterations) per node and layer.
    hidden : int or None
        The width n (None: the dataset's 2Q + 1000).
    timeout : float
        The wall-time limit of one case [s].
    """

    dataset: str
    layers: int
    nodes: tuple[int, ...]
    cap: int
    hidden: int | None = None
    timeout: float = 3600.0


#: ``--preset``: ``quick`` a smoke run in seconds; ``satimage`` the map to M = 256 (async
#: on the circular graph d = 8 needs about 640 - 1,130 activations per node and layer at
#: M = 256, so K = 3000 leaves room for noise); ``mnist`` to M = 1,024 at one hidden layer.
PRESETS: dict[str, CrossoverPreset] = {
    "quick": CrossoverPreset("digits", 1, (4, 8), cap=200, hidden=100, timeout=300.0),
    "satimage": CrossoverPreset("satimage", 2, (16, 64, 256), cap=3000),
    "mnist": CrossoverPreset("mnist", 1, (16, 64, 256, 1024), cap=3000, timeout=7200.0),
}


@dataclass(frozen=True)
class Case:
    """One simulated run of the sweep."""

    dataset: str
    nodes: int
    graph: str
    noise: str
    mode: str
    network: str
    layers: int
    cap: int
    seed: int = 0

    @property
    def key(self) -> str:
        """What identifies the case in the summary (its cap excluded: a case re-run at
        another cap replaces it)."""
        return (f"{self.dataset}/M{self.nodes}/{self.graph}/{self.noise}/{self.mode}/"
                f"{self.network}/L{self.layers}/s{self.seed}")

    @property
    def label(self) -> str:
        return (f"{self.dataset} M={self.nodes} {self.graph} {self.noise} {self.mode} "
                f"{self.network}")

    def simulate_args(self, eps: float, hidden: int | None, data_dir: str | None) -> list[str]:
        """Its ``dssfn-mpi simulate`` arguments (without ``--out``)."""
        from .presets import Preset
        from .specs import simulate_args

        p = Preset(dataset=self.dataset, layers=self.layers, hidden=hidden, iters=self.cap,
                   stop=f"eps:{eps:g}", relax=None)
        args = simulate_args(p, self.dataset, data_dir, self.nodes,
                             GRAPHS[self.graph](self.nodes), self.mode, self.seed)
        return [*args, *NOISES[self.noise], "--network", self.network]


def _choose(text: str | None, known: Sequence[str], what: str) -> tuple[str, ...]:
    """The comma-separated names of ``text`` (all of ``known`` without it), each checked."""
    if not text:
        return tuple(known)
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    for name in names:
        require(name in known, f"--{what} {name!r}: choose from {', '.join(known)}")
    return names


def check_modes(modes: Sequence[str]) -> tuple[str, ...]:
    """The modes, each a decentralized algorithm of the registry.

    Raises
    ------
    UserError
        An unknown mode, or the central reference.
    """
    from ...algorithms import lookup

    for mode in modes:
        require(lookup(mode).decentralized,
                f"--modes {mode}: the crossover compares decentralized modes only")
    return tuple(modes)


def case_list(p: CrossoverPreset, modes: Sequence[str], graphs: Sequence[str],
              noises: Sequence[str], networks: Sequence[str], seed: int = 0) -> list[Case]:
    """Every case in the order it runs (module docstring)."""
    first = [n for n in noises if n in FIRST_NOISES]
    later = [n for n in noises if n not in FIRST_NOISES]
    out = []
    for network in networks:
        for M in p.nodes:
            for group in (first, later):
                out += [Case(p.dataset, int(M), g, n, m, network, p.layers, p.cap, seed)
                        for n in group for g in graphs for m in modes]
    return out


# --------------------------------------------------------------------------- records


def _layer_facts(run: Any, mode: str) -> dict[str, Any]:
    """Each layer's simulated time (the last node's end of it minus the last node's end of
    the layer before), whether every node ended it by the eps rule, and the sums."""
    import numpy as np

    from ...algorithms import lookup
    from ...algorithms.stoprule import reason_code

    ends = np.asarray(run.extra.get("sim_layer_end", np.zeros((0, 0))), dtype=float)
    last = ends.max(axis=1) if ends.size else np.zeros(0)
    times = np.diff(np.concatenate([[0.0], last]))
    reasons = np.asarray(run.layers.get("stop_reason", np.zeros((0, 0))))
    direct = lookup(mode).direct
    at_eps = [bool(np.all((r == reason_code("eps")) | ((r == -1) & direct))) for r in reasons]
    return {"layer_times": [float(t) for t in times], "layer_eps": at_eps,
            "time_after_input": float(times[1:].sum()) if times.size > 1 else math.nan,
            "time_all": float(last[-1]) if last.size else math.nan}


#: Root attributes of a simulated run log copied into its record.
_SIM_ATTRS = ("graph_diameter", "graph_spectral_gap", "graph_algebraic_connectivity",
              "graph_min_degree", "sim_network", "sim_allreduce", "sim_speed",
              "sim_cpu_seconds", "sim_wall_seconds", "sim_peak_rss_bytes", "sim_load_average",
              "sim_total_seconds")


def _scalar(value: Any) -> Any:
    """A run-log attribute as a plain Python value (numpy scalars unwrapped)."""
    return value.item() if hasattr(value, "item") else value


def case_record(case: Case, run: Any, status: str, error: str, job_seconds: float,
                command: str, eps: float) -> dict[str, Any]:
    """The summary's record of one case: the sweep record of its run log
    (:func:`~dssfn_mpi.bench.summaries.records.run_record`) with the case's labels, each
    layer's simulated time and eps state, the graph's facts and the simulation's cost;
    without a run log, the labels, status and error alone."""
    from ..summaries.records import run_record

    meta = {"bench": "crossover", "bench_mode": case.mode, "bench_value": case.nodes,
            "bench_graph": case.graph, "bench_case": case.noise, "bench_kind": "simulated",
            "bench_status": status, "bench_error": error, "bench_dataset": case.dataset}
    labels = {"key": case.key, "net": case.network, "cap": case.cap, "seed": case.seed,
              "job_seconds": float(job_seconds), "command": command}
    if run is None:
        return {"name": case.key, "bench": "crossover", "mode": case.mode,
                "kind": "simulated", "value": float(case.nodes), "ok": False,
                "status": status, "error": error, "dataset": case.dataset,
                "nodes": case.nodes, "graph": case.graph, "case": case.noise,
                "layers": case.layers, "eps_reached": None, **labels}
    run.attrs.update(meta)
    rec = run_record(case.key, run, eps=eps)
    rec.update(labels)
    rec.update({k: _scalar(run.attrs[k]) for k in _SIM_ATTRS if k in run.attrs})
    rec.update(_layer_facts(run, case.mode))
    return rec


# --------------------------------------------------------------------------- the file


def _summary(path: Path, eps: float, network: str) -> dict[str, Any]:
    """The summary at ``path`` (a new one when there is none yet).

    Raises
    ------
    UserError
        The file is another benchmark's summary, or not a summary.
    """
    from ..summaries.records import SUMMARY_FORMAT, SUMMARY_VERSION, machine, now, read_summary

    if path.exists():
        data = read_summary(path)
        require(data.get("bench") == "crossover",
                f"--out {path}: a {data.get('bench')} summary, not a crossover one; "
                "choose another --out")
        return data
    return {"format": SUMMARY_FORMAT, "version": SUMMARY_VERSION, "bench": "crossover",
            "network": network, "eps": eps, "made": now(), "machine": machine(),
            "info": {}, "records": [], "tables": {}}


def _redo(rec: dict[str, Any], redo: Sequence[str]) -> bool:
    """Whether a recorded case is run again (``--redo failed,capped``)."""
    if "failed" in redo and rec.get("status") != "ok":
        return True
    return "capped" in redo and rec.get("eps_reached") is False


def _info(p: CrossoverPreset, eps: float) -> dict[str, Any]:
    return {"dataset": p.dataset, "datasets": [p.dataset], "layers": p.layers,
            "hidden": p.hidden if p.hidden is not None else "2Q + 1000",
            "iters": p.cap, "stop": f"eps:{eps:g}", "graphs": list(GRAPHS),
            "noises": list(NOISES),
            "times": "simulated seconds: each activation's measured thread CPU time plus the "
                     "network model (dssfn-mpi simulate --speed measured)",
            "allreduce": "sync's collective costed by MPICH's allreduce algorithms (Thakur, "
                         "Rabenseifner and Gropp 2005; analysis/network.py), the run log's "
                         "sim_allreduce"}


def _store(summary: dict[str, Any], rec: dict[str, Any], path: Path) -> None:
    """Put ``rec`` in the summary (replacing its case's earlier record) and write the file."""
    from ..summaries.records import now, write_summary

    summary["records"] = [r for r in summary["records"] if r.get("key") != rec["key"]] + [rec]
    summary["made"] = now()
    write_summary(summary, path)


# --------------------------------------------------------------------------- running


def _run_case(case: Case, args: list[str], tmp: Path, timeout: float, eps: float) \
        -> dict[str, Any]:
    """Run one case as a subprocess and make its record."""
    from ...launch import train_command
    from ...runlog import read_runlog
    from .jobs import error_line, job_env, job_status, run_job

    cmd = train_command(None, [*args, "--out", str(tmp), "--overwrite", "--quiet"])
    try:
        res = run_job(cmd, job_env(None), timeout)
        try:
            log = read_runlog(tmp) if tmp.exists() else None
        except (UserError, OSError, KeyError, ValueError):
            log = None
        status = job_status(res, log)
        error = "" if status == "ok" else error_line(res, timeout, log)
        shown = shlex.join(["dssfn-mpi", *args])
        return case_record(case, log, status, error, res.seconds, shown, eps)
    finally:
        tmp.unlink(missing_ok=True)


def _progress(rec: dict[str, Any]) -> str:
    """The end of a case's progress line."""
    from ...fmt import number

    if rec.get("status") != "ok" and "layer_times" not in rec:
        return f"{rec['status'].upper():<7} job {rec['job_seconds']:6.1f} s  {rec['error']}"
    state = {True: "eps", False: "CAPPED"}.get(rec.get("eps_reached"), "?")
    acts = "/".join(f"{a:g}" for a in rec.get("activations_per_layer", []))
    return (f"{rec['status']:<7} {state:<6} sim {number(rec.get('time_all'), '.4f')} s "
            f"(layers >= 1: {number(rec.get('time_after_input'), '.4f')} s)  per node "
            f"{acts}  cpu {number(rec.get('sim_cpu_seconds'), '.1f')} s  "
            f"wall {rec['job_seconds']:.1f} s"
            + (f"  {rec['error']}" if rec.get("error") else ""))


def _pending(cases: list[Case], summary: dict[str, Any], redo: Sequence[str]) \
        -> Iterator[tuple[int, Case]]:
    done = {r.get("key"): r for r in summary["records"]}
    for i, case in enumerate(cases, 1):
        if case.key not in done or _redo(done[case.key], redo):
            yield i, case


def run_cases(cases: list[Case], p: CrossoverPreset, out: Path, eps: float,
              data_dir: str | None = None, redo: Sequence[str] = (),
              stream: TextIO | None = None) -> int:
    """Run every case not yet in the summary ``out`` and record it there.

    Returns
    -------
    int
        The cases that failed or ran into the timeout in this call.
    """
    from .busy import exit_on_signals

    stream = stream or sys.stdout
    summary = _summary(out, eps, cases[0].network if cases else "ib")
    summary["info"] = {**summary.get("info", {}), **_info(p, eps)}
    todo = list(_pending(cases, summary, redo))
    print(f"bench crossover: {len(cases)} cases, {len(cases) - len(todo)} already in {out}, "
          f"{len(todo)} to run", file=stream, flush=True)
    width, bad = max((len(c.label) for c in cases), default=10), 0
    with exit_on_signals():  # SIGTERM ends the running case too
        for i, case in todo:
            print(f"[{i:>{len(str(len(cases)))}}/{len(cases)}] {case.label:<{width}} ", end="",
                  file=stream, flush=True)
            tmp = out.parent / f".{out.stem}.{i}.h5"
            rec = _run_case(case, case.simulate_args(eps, p.hidden, data_dir), tmp, p.timeout,
                            eps)
            _store(summary, rec, out)
            bad += rec["status"] != "ok"
            print(_progress(rec), file=stream, flush=True)
    return bad


# --------------------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``bench crossover``."""
    from ...options import at_least, positive

    p.add_argument("--preset", choices=list(PRESETS), default="quick",
                   help="; ".join(f"{k}: {v.dataset}, L = {v.layers}, M = "
                                  f"{','.join(map(str, v.nodes))}, K = {v.cap}"
                                  for k, v in PRESETS.items()))
    p.add_argument("--out", help="the summary (JSON) to write or add to; cases already in it "
                   "are skipped (required unless --dry-run)")
    p.add_argument("--modes", help=f"comma-separated modes (default {','.join(MODES)})")
    p.add_argument("--graphs", help=f"comma-separated graphs (default {','.join(GRAPHS)})")
    p.add_argument("--noise", help=f"comma-separated noise cases (default {','.join(NOISES)})")
    p.add_argument("--nodes", help="comma-separated node counts M (default: the preset's)")
    p.add_argument("--networks", default="ib",
                   help=f"comma-separated networks of the simulated time ({','.join(NETWORKS)};"
                   " default ib)")
    p.add_argument("--cap", type=at_least(1), help="K >= 1, the cap of activations "
                   "(iterations) per node and layer (default: the preset's)")
    p.add_argument("--eps", type=positive, default=1e-2, help="the target distance to O* (> 0)")
    p.add_argument("--seed", type=at_least(0), default=0, help="seed (>= 0) of the split, the "
                   "weights and the random-regular graph")
    p.add_argument("--job-timeout", type=positive, metavar="SECONDS",
                   help="wall-time limit (> 0) of one case (default: the preset's)")
    p.add_argument("--redo", default="", help="run recorded cases again: failed (failed or "
                   "timed out), capped (a layer at the cap), or both comma-separated")
    p.add_argument("--data-dir", help="folder with the public dataset files")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")


def _preset(args: argparse.Namespace) -> CrossoverPreset:
    p = PRESETS[args.preset]
    if args.nodes:
        try:
            nodes = tuple(int(s) for s in args.nodes.split(",") if s.strip())
        except ValueError:
            raise UserError(f"--nodes {args.nodes}: comma-separated integers") from None
        require(all(M >= 2 for M in nodes), f"--nodes {args.nodes}: every M must be >= 2")
        p = replace(p, nodes=nodes)
    if args.cap is not None:
        p = replace(p, cap=args.cap)
    if args.job_timeout is not None:
        p = replace(p, timeout=args.job_timeout)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``bench crossover``; the exit status (1 if a case failed or timed out)."""
    p = _preset(args)
    modes = check_modes([s.strip() for s in (args.modes or "").split(",") if s.strip()]
                        or MODES)
    cases = case_list(p, modes, _choose(args.graphs, list(GRAPHS), "graphs"),
                      _choose(args.noise, list(NOISES), "noise"),
                      _choose(args.networks, tuple(NETWORKS), "networks"), args.seed)
    redo = _choose(args.redo, ("failed", "capped"), "redo") if args.redo else ()
    if args.dry_run:
        for case in cases:
            print(shlex.join(["dssfn-mpi", *case.simulate_args(args.eps, p.hidden,
                                                                args.data_dir)]))
        return 0
    require(bool(args.out), "bench crossover needs --out FILE.json (only --dry-run goes "
            "without)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return 1 if run_cases(cases, p, out, args.eps, args.data_dir, redo) else 0
