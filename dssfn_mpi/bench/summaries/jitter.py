"""The jitter view: noisy and slow-node clusters projected from one configuration's runs.

Replay multiplies each activation's compute by a seeded random factor
(``--jitter exp:MEAN`` or ``lognormal:SIGMA``, defined in :mod:`dssfn_mpi.analysis.replay`)
or slows chosen ranks, and replays the run with one core per rank. Theory: a
synchronous iteration waits for the slowest of M ranks, so its time grows
with the expected maximum of M factors, while async waits only for the
neighbours within its bounded delay. This view puts those projected times and
the sync / async ratios side by side, from the *unslowed* runs of one
configuration of a sweep (straggler: the runs without a straggler; nodes: the
largest M; degree: the degree nearest 8).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...fmt import number
from ...runlog import RunLog
from ..variants import decentralized
from .projection import DEFAULT_EPS, DEFAULT_NETWORK, project_run, run_time_to_eps

__all__ = ["CASES", "REFERENCE", "baseline_runs", "jitter_markdown", "jitter_rows"]

#: The mode every ratio is taken to: the paper's asynchronous method.
REFERENCE = "async"

#: (label, jitter, slow) of every row: no noise, two noise levels, one 5x straggler.
CASES: tuple[tuple[str, str | None, dict[int, float] | None], ...] = (
    ("no jitter", None, None),
    ("jitter exp:0.5", "exp:0.5", None),
    ("jitter exp:1.0", "exp:1.0", None),
    ("rank 0 x5", None, {0: 5.0}),
)


def baseline_runs(runs: Mapping[str, RunLog]) -> tuple[dict[str, RunLog], str]:
    """The unslowed runs of one configuration, by mode, and a description of it.

    Parameters
    ----------
    runs : mapping of str to RunLog
        One benchmark's runs of a sweep file (straggler, nodes or degree).

    Returns
    -------
    dict of str to RunLog, str
        Mode -> run (successful, non-central runs only) and e.g. ``"M = 20,
        d = 8"``; empty when there is nothing to project.
    """
    ok = [r for r in runs.values() if r.attrs.get("bench_status", "ok") == "ok"
          and r.layers_done > 0 and decentralized(str(r.attrs.get("mode")))]
    if not ok:
        return {}, ""
    bench = str(ok[0].attrs.get("bench", ""))
    if bench == "straggler":
        chosen = [r for r in ok if str(r.attrs.get("bench_pattern", "none")) == "none"]
    else:
        values = sorted({float(r.attrs.get("bench_value", -1)) for r in ok})
        pick = max(values) if bench == "nodes" else min(values, key=lambda v: abs(v - 8))
        chosen = [r for r in ok if float(r.attrs.get("bench_value", -1)) == pick]
    by_mode = {str(r.attrs.get("bench_mode", r.attrs.get("mode"))): r for r in chosen}
    if not by_mode:
        return {}, ""
    a = next(iter(by_mode.values())).attrs
    return by_mode, f"M = {a.get('nodes', '?')}, d = {a.get('degree', '?')}"


def _scaled(run: RunLog, proj) -> float:
    """Projected total with the solve scaled to the sweep's K (shortened sync-graph)."""
    k, target = int(run.attrs.get("iters", 0)), int(run.attrs.get("bench_target_iters", 0) or 0)
    factor = target / k if (k > 0 and target > 0) else 1.0
    return float(proj.total_seconds + sum(lp.solve_seconds for lp in proj.layers) * (factor - 1))


def jitter_rows(runs: Mapping[str, RunLog], network: str = DEFAULT_NETWORK,
                eps: float = DEFAULT_EPS, seeds: int = 3) -> list[dict]:
    """Projected time and time to eps per mode for every case of :data:`CASES`.

    Parameters
    ----------
    runs : mapping of str to RunLog
        One benchmark's runs (see :func:`baseline_runs`).
    network : str
        Network of the projection.
    eps : float
        Target of the time to eps.
    seeds : int
        Jitter cases are the mean over replay seeds ``0 .. seeds - 1``.

    Returns
    -------
    list of dict
        Per case: ``case``, ``seconds`` and ``time_to_eps`` (dicts mode ->
        mean projected seconds, NaN without a trace) and ``ratio`` (mode ->
        its seconds / :data:`REFERENCE`'s, for every other mode). Empty without runs.
    """
    base, _what = baseline_runs(runs)
    rows = []
    for label, jitter, slow in CASES:
        secs: dict[str, float] = {}
        tte: dict[str, float] = {}
        for mode, run in base.items():
            got = [project_run(run, network, slow=slow, jitter=jitter, seed=s, eps=eps)
                   for s in range(seeds if jitter else 1)]
            secs[mode] = float(np.mean([_scaled(run, p) if p is not None else math.nan
                                        for p in got]))
            tte[mode] = float(np.mean([run_time_to_eps(p) for p in got]))
        ref = secs.get(REFERENCE, math.nan)
        rows.append({"case": label, "seconds": secs, "time_to_eps": tte,
                     "ratio": {m: v / ref for m, v in secs.items() if m != REFERENCE}})
    return rows


def jitter_markdown(summary: Mapping[str, Any]) -> str:
    """The jitter view of a sweep summary's ``jitter`` table as Markdown (``jitter.md`` of
    ``dssfn-mpi plot``)."""
    table = summary["tables"].get("jitter")
    if not table or not table["rows"]:
        return "(no unslowed runs to project)"
    network, eps, rows, what = summary["network"], summary["eps"], table["rows"], table["what"]
    seeds = table.get("seeds", 3)
    modes = list(rows[0]["seconds"])
    star = {m: "*" if table.get("shortened", {}).get(m) else "" for m in modes}
    others = [m for m in modes if m != REFERENCE]
    lines = [
        "| case | " + " | ".join(f"{m}{star[m]} projected [s]" for m in modes) + " | "
        + " | ".join(f"{m} to eps [s]" for m in modes) + " | "
        + " | ".join(f"{m} / {REFERENCE}" for m in others) + " |",
        "|---" * (1 + 2 * len(modes) + len(others)) + "|",
    ]
    for r in rows:
        lines.append(f"| {r['case']} | "
                     + " | ".join(number(r["seconds"][m], ".3f") for m in modes) + " | "
                     + " | ".join(number(r["time_to_eps"][m], ".3f") for m in modes) + " | "
                     + " | ".join(number(r["ratio"].get(m, math.nan), ".2f") for m in others)
                     + " |")
    lines += ["", f"Projected from the unslowed runs at {what} (one core per rank, network "
              f"{network}); jitter rows: each activation's compute times a seeded random factor, "
              f"mean over replay seeds 0..{seeds - 1}; rank 0 x5: one straggler applied in "
              f"replay. To eps: until the last layer is within {eps:g} of O*."]
    if any(star.values()):
        lines.append("`*`: run at fewer iterations; projected solve time scaled to the sweep's "
                     "K, time to eps as at the smaller K.")
    return "\n".join(lines)
