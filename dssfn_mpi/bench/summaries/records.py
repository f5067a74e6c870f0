"""Sweep summaries: the small files every benchmark figure and results table is drawn from.

A sweep file holds whole run logs with their activation traces (megabytes per
run); its summary holds, per run, the numbers the figures and tables show
(JSON, a few kB per run), and the tables that need the traces (projections under
jitter or a straggler) already computed. ``dssfn-mpi plot`` draws a sweep file
by summarising it first and drawing the summary, so a committed summary
(``results/data/``) redraws exactly what its sweep file would.

One record per run (:func:`run_record`): its labels (benchmark, mode, swept
value, dataset, M, d, K, stop rule, case), the numbers of
:class:`~dssfn_mpi.bench.summaries.summary.RunSummary` and, for runs to accuracy
(``--stop eps:E``):

``eps_reached``
    every layer (the input layer included) of every rank ended by the eps rule
    (the one-shot modes, exact in one step, count as reached); False when a
    layer ended at the cap K, None for runs with another stop rule;
``time_at_eps``
    the time of the whole run, every layer to eps: live runs projected with one
    core per rank (their trace replayed, :mod:`dssfn_mpi.bench.summaries.projection`),
    simulated runs in simulated time (``sim_total_seconds``); when a layer
    ended at the cap it is the time at the cap, a lower bound, and the figures
    mark it.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...algorithms.stoprule import reason_code
from ...errors import UserError, require
from ...runlog import RunLog
from ..variants import algorithm, decentralized
from .projection import DEFAULT_EPS, DEFAULT_NETWORK, project_run
from .summary import summarize

__all__ = ["ACCURACY_FORMAT", "COST_KIND", "SUMMARY_FORMAT", "derived_records", "eps_reached",
           "file_kind", "machine", "read_summary", "run_record", "sweep_summaries", "write_summary"]

SUMMARY_FORMAT = "dssfn-mpi sweep summary"
#: The ``format`` of ``dssfn-mpi bench accuracy``'s time-to-eps summary.
ACCURACY_FORMAT = "dssfn-mpi time-to-eps summary"
#: The kind (in MANIFEST.json) of the one-shot baseline's cost measurements.
COST_KIND = "oneshot"
SUMMARY_VERSION = 1

#: ``bench_*`` labels copied into a record (without the prefix) when the run has them.
_LABELS = ("setting", "dataset", "seed", "pattern", "factor", "slow_ranks", "case", "jitter",
           "wait", "busy", "rep", "kind", "graph", "relax")
#: RunSummary fields copied into a record.
_NUMBERS = ("train_seconds", "scaled_seconds", "median_rank_seconds", "wait_seconds",
            "solve_seconds", "cpu_seconds", "projected_seconds", "projected_scaled_seconds",
            "time_to_eps", "acc_mean", "acc_min", "acc_max", "rel_distance", "iters")
_ARRAYS = ("acc_per_layer", "rel_per_layer", "layer_seconds", "projected_per_layer")


def _plain(value: Any) -> Any:
    """A JSON-friendly copy: arrays to lists, numpy scalars to Python numbers."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def eps_reached(run: RunLog) -> bool | None:
    """Whether every layer of ``run`` ended by the eps rule on every rank (module docstring);
    None when the run did not stop by ``eps``."""
    if not str(run.config.get("stop", "iters")).startswith("eps"):
        return None
    reasons = np.asarray(run.layers.get("stop_reason", np.zeros((0, 0))))
    if reasons.size == 0:
        return False
    alg = algorithm(str(run.attrs.get("mode")))
    exact = alg is not None and alg.exchanges_statistics
    done = (reasons == reason_code("eps")) | ((reasons == -1) & exact)
    return bool(np.all(done))


def _time_at_eps(run: RunLog, projected: float, reached: bool | None) -> float:
    if reached is None:
        return math.nan
    if run.attrs.get("simulated"):
        return float(run.attrs.get("sim_total_seconds", math.nan))
    return projected


def run_record(name: str, run: RunLog, network: str = DEFAULT_NETWORK,
               eps: float = DEFAULT_EPS) -> dict[str, Any]:
    """The record of one run of a sweep (module docstring); JSON-friendly."""
    a = run.attrs
    target = int(a.get("bench_target_iters", 0) or 0) or None
    s = summarize(name, run, target, network=network, eps=eps)
    reached = eps_reached(run)
    rec: dict[str, Any] = {
        "name": name, "bench": str(a.get("bench", "sweep")),
        "mode": str(a.get("bench_mode", a.get("mode", ""))),
        "kind": "simulated" if a.get("simulated") else "live",
        "value": float(a.get("bench_value", -1)), "ok": s.ok,
        "status": str(a.get("bench_status", "ok")), "error": str(a.get("bench_error", "")),
        "dataset": str(a.get("dataset", "")), "nodes": int(a.get("nodes", 0) or 0),
        "degree": int(a.get("degree", 0) or 0), "topology": str(a.get("topology", "")),
        "layers": int(a.get("layers", 0) or 0), "hidden": int(a.get("hidden", 0) or 0),
        "target_iters": target or s.iters, "stop": str(run.config.get("stop", "iters")),
        "slow": {str(k): float(v) for k, v in (run.config.get("slow") or {}).items()},
        "max_lead": run.config.get("max_lead"),
    }
    for label in _LABELS:
        if f"bench_{label}" in a:
            rec[label] = _plain(a[f"bench_{label}"])
    rec.update({k: _plain(getattr(s, k)) for k in (*_NUMBERS, *_ARRAYS)})
    acts = np.asarray(run.layers.get("activations", np.zeros((0, 0))), dtype=float)
    rec["activations_per_layer"] = _plain(acts.max(axis=1)) if acts.ndim == 2 and acts.size \
        else []
    rec["eps_reached"] = reached
    rec["time_at_eps"] = _time_at_eps(run, s.projected_seconds, reached)
    return rec


def derived_records(runs: Mapping[str, RunLog], network: str = DEFAULT_NETWORK,
                    eps: float = DEFAULT_EPS, seeds: int = 3) -> list[dict[str, Any]]:
    """The noise benchmark's projected cases without a live run of their own: each
    unslowed live run replayed with every jitter of the sweep (mean over replay seeds
    ``0 .. seeds - 1``) and, for engines without a live straggler run, with each
    straggler (replay's ``slow``). ``kind = "replay"``; replay moves the run's activations
    in time and adds none, so ``eps_reached`` is the unslowed run's."""
    live = {(r.attrs.get("bench_mode"), r.attrs.get("bench_case")): (k, r) for k, r in runs.items()
            if r.attrs.get("bench_kind") == "live" and r.attrs.get("bench_status", "ok") == "ok"}
    cases = {str(r.attrs.get("bench_case")): r.attrs for r in runs.values()
             if r.attrs.get("bench_kind") == "simulated"}
    out = []
    for (mode, case), (name, run) in live.items():
        if case != "none":
            continue
        base = run_record(name, run, network, eps)
        for other, attrs in cases.items():
            if other == "none" or (mode, other) in live:
                continue
            jitter = str(attrs.get("bench_jitter", "")) or None
            factor = float(attrs.get("bench_factor", 1.0))
            slow = None if jitter else {0: factor}
            projs = [project_run(run, network, slow=slow, jitter=jitter, seed=s, eps=eps)
                     for s in range(seeds if jitter else 1)]
            secs = [p.total_seconds for p in projs if p is not None]
            out.append({**base, "name": f"{name}@{other}", "kind": "replay", "case": other,
                        "jitter": jitter or "", "factor": factor, "value": factor,
                        "projected_seconds": float(np.mean(secs)) if secs else math.nan,
                        "time_at_eps": float(np.mean(secs)) if secs else math.nan,
                        "train_seconds": math.nan, "replay_seeds": len(secs)})
    return out


def _info(runs: Mapping[str, RunLog]) -> dict[str, Any]:
    """What the figures' titles name: dataset, M, d, L, n, K of the decentralized runs."""
    ok = [r for r in runs.values() if decentralized(str(r.attrs.get("mode")))] \
        or list(runs.values())
    a = ok[0].attrs if ok else {}
    keys = ("dataset", "nodes", "degree", "layers", "hidden", "iters", "topology",
            "mpi_library", "bench_preset", "bench_target_iters")
    info = {k: _plain(a[k]) for k in keys if k in a}
    # a failed job's entry carries no run attributes, so no dataset to name
    info["datasets"] = sorted({str(r.attrs.get("dataset", "")) for r in runs.values()} - {""})
    hosts = {h for r in runs.values() for h in (r.hostnames or [])}
    info["hosts"] = max(len(hosts), 1)
    info["stop"] = str(ok[0].config.get("stop", "iters")) if ok else "iters"
    return info


def _tables(bench: str, runs: Mapping[str, RunLog], network: str, eps: float) -> dict:
    """The tables a benchmark's figures need that are computed from whole runs."""
    from .jitter import baseline_runs, jitter_rows
    from .projection import has_trace

    tables: dict[str, Any] = {}
    if bench in ("degree", "nodes", "straggler") and any(has_trace(r) for r in runs.values()):
        base, what = baseline_runs(runs)
        short = {m: int(r.attrs.get("iters", 0)) != int(r.attrs.get("bench_target_iters", 0)
                                                         or r.attrs.get("iters", 0))
                 for m, r in base.items()}
        tables["jitter"] = {"what": what, "seeds": 3, "shortened": short,
                            "rows": _plain(jitter_rows(runs, network, eps))}
    if bench == "table2":
        from .table2 import table2_rows

        tables["table2"] = _plain(table2_rows(runs, network, eps))
    if bench == "contention":
        from .tables import contention_rows

        tables["contention"] = _plain(contention_rows(runs))
    if bench == "straggler":
        from .tables import straggler_rows

        rows = straggler_rows(runs, network, eps)
        for r in rows:
            r["live"] = None if r["live"] is None else {
                k: _plain(getattr(r["live"], k)) for k in (*_NUMBERS, *_ARRAYS)}
        tables["straggler"] = _plain(rows)
    return tables


def sweep_summaries(runs: Mapping[str, RunLog], network: str = DEFAULT_NETWORK,
                    eps: float = DEFAULT_EPS) -> dict[str, dict[str, Any]]:
    """One summary per benchmark found in a sweep's runs (runs of no benchmark: ``sweep``).

    Returns
    -------
    dict of str to dict
        Benchmark -> ``{"format", "version", "bench", "network", "eps", "info",
        "records", "tables"}``.
    """
    by_bench: dict[str, dict[str, RunLog]] = defaultdict(dict)
    for key, run in runs.items():
        by_bench[str(run.attrs.get("bench", "sweep"))][key] = run
    out = {}
    for bench, group in by_bench.items():
        records = [run_record(k, r, network, eps) for k, r in group.items()]
        if bench == "noise":
            records += derived_records(group, network, eps)
        ends = [str(r.attrs.get("end_time", "")) for r in group.values()]
        out[bench] = {"format": SUMMARY_FORMAT, "version": SUMMARY_VERSION, "bench": bench,
                      "network": network, "eps": eps, "made": max(ends, default="") or now(),
                      "machine": machine(), "info": _info(group),
                      "records": records, "tables": _tables(bench, group, network, eps)}
    return out


def _processor() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else its architecture."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """Where a data file was made: host name, processor, logical CPUs, OS, Python."""
    return {"host": platform.node(), "processor": _processor(), "cpus": os.cpu_count(),
            "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def write_summary(summary: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write ``summary`` as JSON (atomically: a reader never sees half a file)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(_plain(dict(summary)), indent=1, sort_keys=False) + "\n")
    tmp.replace(p)
    return p


def read_summary(path: str | os.PathLike) -> dict[str, Any]:
    """Read a summary written by :func:`write_summary`.

    Raises
    ------
    UserError
        Not a summary file, or one of another version.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{p}: not a readable sweep summary ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != SUMMARY_FORMAT:
        raise UserError(f"{p}: not a sweep summary (written by dssfn-mpi plot --summary)")
    if data.get("version") != SUMMARY_VERSION:
        raise UserError(f"{p}: sweep summary of version {data.get('version')}, this version "
                        f"reads {SUMMARY_VERSION}; summarise the sweep file again")
    return data


def file_kind(path: str | os.PathLike) -> str:
    """``summary``, ``oneshot``, ``rma`` or ``accuracy`` of a data file, from its content.

    Raises
    ------
    UserError
        A file of none of these kinds.
    """
    p = Path(path)
    if p.suffix == ".h5":
        import h5py

        try:
            with h5py.File(p, "r") as f:
                kind = f.attrs.get("kind", "")
        except OSError:
            raise UserError(f"{p}: not an HDF5 file") from None
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        require(kind == "rma", f"{p}: only RMA files (bench rma) are kept as HDF5 data; "
                "summarise a sweep with dssfn-mpi plot SWEEP.h5 and add its JSON")
        return "rma"
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{p}: not a JSON data file ({exc})") from None
    if isinstance(data, dict) and data.get("format") == SUMMARY_FORMAT:
        return "summary"
    if isinstance(data, dict) and "rows" in data and "n_classes" in data:
        return COST_KIND
    if isinstance(data, dict) and data.get("format") == ACCURACY_FORMAT:
        return "accuracy"
    raise UserError(f"{p}: neither a sweep summary (dssfn-mpi plot), the one-shot cost "
                    "(python -m dssfn_mpi.bench.micro.oneshot --out) nor a time-to-eps summary "
                    "(dssfn-mpi bench accuracy)")


def now() -> str:
    """The current UTC time, as the manifest records it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
