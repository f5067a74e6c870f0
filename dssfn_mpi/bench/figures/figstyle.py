"""What every benchmark figure shares: the Agg back end, colours per mode, saving.

Used by :mod:`dssfn_mpi.bench.figures.plot` and :mod:`dssfn_mpi.bench.figures.timeplots`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.pyplot as plt  # noqa: E402

from ...runlog import RunLog  # noqa: E402

__all__ = ["ENGINE_COLOURS", "MODE_STYLE", "describe", "describe_info", "engine_of",
           "ok_runs", "plt", "save", "style"]

#: The one colour of each engine, in every figure. Variants of an engine (async's bounded
#: delays) keep its colour and differ by marker.
ENGINE_COLOURS = {
    "async": "tab:blue",
    "sync": "tab:orange",
    "sync-graph": "tab:green",
    "oneshot": "tab:red",
    "oneshot-graph": "tab:purple",
    "central": "black",
}

#: Marker of each mode or variant (colour: its engine's).
_MARKERS = {"async": "o", "async-unbounded": "v", "sync": "s", "sync-graph": "^",
            "oneshot": "D", "oneshot-graph": "P", "central": "x"}
_LEAD_MARKERS = {"4": "o", "16": "<", "64": ">"}

MODE_STYLE = {mode: dict(color=ENGINE_COLOURS[mode.split("-unbounded")[0]], marker=marker)
              for mode, marker in _MARKERS.items()}
_DPI = 100


def save(fig: Any, outdir: Path, stem: str) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` and ``<stem>.pdf`` into ``outdir`` and close it."""
    paths = []
    for ext in ("png", "pdf"):
        path = outdir / f"{stem}.{ext}"
        # no creation date in the PDF: the same data redraw the same file
        meta = {"CreationDate": None} if ext == "pdf" else None
        fig.savefig(path, dpi=_DPI, bbox_inches="tight", metadata=meta)
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


def engine_of(mode: str) -> str:
    """The engine of a mode or variant: ``async-lead16``, ``async-unbounded``, ``async@1.8``
    -> ``async``."""
    mode = mode.split("@")[0]
    if mode.startswith("async-lead") or mode == "async-unbounded":
        return "async"
    return mode


def style(mode: str) -> dict:
    """Colour (its engine's) and marker of a mode or variant (a fresh dict the caller may
    change); ``{}`` for a name that is no mode."""
    if mode in MODE_STYLE:
        return dict(MODE_STYLE[mode])
    engine = engine_of(mode)
    if engine not in ENGINE_COLOURS:
        return {}
    lead = mode.removeprefix("async-lead")
    return dict(color=ENGINE_COLOURS[engine], marker=_LEAD_MARKERS.get(lead, "d"))


def describe(run: RunLog) -> str:
    """``dataset, L, n, K`` of a run, for titles."""
    a = run.attrs
    return (f"{a.get('dataset', '?')}, L = {a.get('layers', '?')}, n = {a.get('hidden', '?')}, "
            f"K = {a.get('bench_target_iters', a.get('iters', '?'))}")


def describe_info(info: dict) -> str:
    """``dataset, L, n, K`` of a sweep summary's ``info``, for titles."""
    ds = ", ".join(info.get("datasets") or [str(info.get("dataset", "?"))])
    return (f"{ds}, L = {info.get('layers', '?')}, n = {info.get('hidden', '?')}, "
            f"K = {info.get('bench_target_iters', info.get('iters', '?'))}")


def ok_runs(runs: dict[str, RunLog]) -> dict[str, RunLog]:
    """The successful runs with at least one layer."""
    return {k: r for k, r in runs.items() if r.attrs.get("bench_status", "ok") == "ok"
            and r.layers_done > 0}
