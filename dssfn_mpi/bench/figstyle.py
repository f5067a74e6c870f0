"""What every benchmark figure shares: the Agg back end, colours per mode, saving.

Used by :mod:`dssfn_mpi.bench.plot` and :mod:`dssfn_mpi.bench.timeplots`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.pyplot as plt  # noqa: E402

from ..runlog import RunLog  # noqa: E402

__all__ = ["MODE_STYLE", "describe", "ok_runs", "plt", "save", "style"]

MODE_STYLE = {
    "async": dict(color="tab:blue", marker="o"),
    "async-unbounded": dict(color="tab:cyan", marker="v"),
    "sync": dict(color="tab:orange", marker="s"),
    "sync-graph": dict(color="tab:green", marker="^"),
    "central": dict(color="black", marker="x"),
}
_DPI = 100


def save(fig: Any, outdir: Path, stem: str) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` and ``<stem>.pdf`` into ``outdir`` and close it."""
    paths = []
    for ext in ("png", "pdf"):
        path = outdir / f"{stem}.{ext}"
        fig.savefig(path, dpi=_DPI, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    _shrink_png(paths[0])
    return paths


def _shrink_png(path: Path) -> None:
    """Re-save a figure PNG with a 256-colour palette: a third of the size, same look
    (line plots use few colours), so figures can be committed."""
    try:
        from PIL import Image
    except ImportError:  # matplotlib depends on Pillow, but stay optional
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def style(mode: str) -> dict:
    """Colour and marker of a mode (a fresh dict the caller may change)."""
    return dict(MODE_STYLE.get(mode, {}))


def describe(run: RunLog) -> str:
    """``dataset, L, n, K`` of a run, for titles."""
    a = run.attrs
    return (f"{a.get('dataset', '?')}, L = {a.get('layers', '?')}, n = {a.get('hidden', '?')}, "
            f"K = {a.get('bench_target_iters', a.get('iters', '?'))}")


def ok_runs(runs: dict[str, RunLog]) -> dict[str, RunLog]:
    """The successful runs with at least one layer."""
    return {k: r for k, r in runs.items() if r.attrs.get("bench_status", "ok") == "ok"
            and r.layers_done > 0}
