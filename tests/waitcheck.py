"""The three wait-policy figures of the shared-laptop measurements (2026-11-23), by command line.

    python tests/waitcheck.py [--reps 5] [--figures busy,shared,dedicated]

Every run is ``mpirun -n N dssfn-mpi train --dataset digits --layers 1 --hidden 200
--iters 1000 --topology ring --no-check --mode MODE --wait POLICY``; its figure is the
slowest rank's layer-1 ``solve_seconds`` (measured wall time) from the run log. Runs of
all configurations are interleaved, ``--reps`` times, and medians compared:

busy       one busy process (``python -c "while True: pass"``, started and killed by this
           script) beside 4 ranks: sync and sync-graph under auto at most 4x their idle time;
shared     idle, 4 and 20 ranks on this machine's cores: auto at most 1.2x spin;
dedicated  idle, 2 ranks (a core each on a 2-core machine): auto within 1.05x spin.

With more ranks than cores the times measure CPU sharing, not a cluster. Other load on
the machine pollutes every figure: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from dssfn_mpi.launch import mpi_env, train_command
from dssfn_mpi.runlog import read_runlog

BASE = ["train", "--dataset", "digits", "--layers", "1", "--hidden", "200", "--iters", "1000",
        "--topology", "ring", "--no-check", "--quiet", "--log-every", "0", "--overwrite"]

def configurations(figures: list[str], modes20: list[str]) -> list[tuple]:
    """The runs: (figure, ranks, mode, policy, busy processes)."""
    runs = []
    if "busy" in figures:
        for mode in ("sync", "sync-graph"):
            for busy in (0, 1):
                runs.append(("busy", 4, mode, "auto", busy))
    if "shared" in figures:
        for mode in ("sync", "sync-graph", "async"):
            for policy in ("spin", "auto"):
                runs.append(("shared", 4, mode, policy, 0))
        for mode in modes20:
            for policy in ("spin", "auto"):
                runs.append(("shared", 20, mode, policy, 0))
    if "dedicated" in figures:
        for mode in ("sync", "sync-graph", "async"):
            for policy in ("spin", "auto"):
                runs.append(("dedicated", 2, mode, policy, 0))
    return runs


def run_one(ranks: int, mode: str, policy: str, busy: int, out: Path) -> dict[str, float]:
    """One training run, with ``busy`` busy processes beside it for its whole length."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        cmd = train_command(ranks, [*BASE, "--mode", mode, "--wait", policy, "--out", str(out)])
        res = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env(), timeout=900,
                             check=False)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    log = read_runlog(out)
    return {"solve": float(log.layers["solve_seconds"][1].max()),
            "cpu": float(log.layers["cpu_seconds"][1].mean()),
            "slept": float(log.layers["waits_slept"][1].mean())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--figures", default="busy,shared,dedicated")
    parser.add_argument("--modes20", default="sync,async",
                        help="modes run on 20 ranks, '' for none (sync-graph on a 20-ring "
                        "needs ~300 mixing rounds per iteration: very long)")
    args = parser.parse_args()
    # A SIGTERM ends the script through the finally blocks, which kill the busy processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    runs = configurations(args.figures.split(","), [m for m in args.modes20.split(",") if m])
    results: dict[tuple, list[dict]] = {r: [] for r in runs}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.h5"
        for rep in range(args.reps):
            for i, run in enumerate(runs):
                fig, ranks, mode, policy, busy = run
                r = run_one(ranks, mode, policy, busy, out)
                results[run].append(r)
                print(f"rep {rep + 1}/{args.reps} [{i + 1}/{len(runs)}] {fig:<9} n={ranks:<2} "
                      f"{mode:<10} {policy:<6} busy={busy}  solve {r['solve']:.3f} s  "
                      f"cpu/rank {r['cpu']:.3f} s  slept {r['slept']:.0f}", flush=True)
    report(results)
    return 0


def _median(rows: list[dict], key: str = "solve") -> float:
    return statistics.median(r[key] for r in rows)


def report(results: dict[tuple, list[dict]]) -> None:
    """Medians, their ratios and the targets."""
    print("\nslowest rank's layer-1 solve seconds, median (min) over the repetitions")
    for (fig, ranks, mode, policy, busy), rows in results.items():
        print(f"  {fig:<9} n={ranks:<2} {mode:<10} {policy:<6} busy={busy}  "
              f"{_median(rows):7.3f} ({min(r['solve'] for r in rows):.3f})  "
              f"cpu/rank {_median(rows, 'cpu'):.3f}")
    print("\nfigures (ratio of medians; target)")
    keys = set(results)
    for fig, ranks, mode, policy, busy in sorted(keys):
        if fig == "busy" and busy == 1:
            ratio = _median(results[(fig, ranks, mode, policy, 1)]) / _median(
                results[(fig, ranks, mode, policy, 0)])
            _verdict(f"busy/idle   n={ranks} {mode} {policy}", ratio, 4.0)
        if fig in ("shared", "dedicated") and policy == "auto":
            ratio = _median(results[(fig, ranks, mode, "auto", 0)]) / _median(
                results[(fig, ranks, mode, "spin", 0)])
            _verdict(f"auto/spin   n={ranks} {mode}", ratio, 1.2 if fig == "shared" else 1.05)


def _verdict(label: str, ratio: float, target: float) -> None:
    print(f"  {label:<34} {ratio:6.2f}  (<= {target:g}: {'ok' if ratio <= target else 'MISSED'})")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
