"""What every benchmark figure shares: the Agg back end, each mode's colour and marker,
saving.

A mode's colour and marker are its algorithm's (``Algorithm.colour``, ``marker``, from the
registry); a mode without its own, and one registered later, gets ones no other mode has.
Variants of a mode (:mod:`dssfn_mpi.bench.variants`) keep its colour and differ by marker.
Figures saved inside :func:`title_note` name the note at the end of their title (a data
file's pinned relaxation, :func:`dssfn_mpi.bench.pages.manifest.pinned_relaxation`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.pyplot as plt  # noqa: E402

from ...algorithms.registry import lookup, names  # noqa: E402
from ...runlog import RunLog  # noqa: E402
from ..variants import parse  # noqa: E402

__all__ = ["describe", "describe_info", "figure_title", "look", "ok_runs", "plt", "save", "style",
           "title_note"]

#: The colours and markers of the modes without their own (``Algorithm.colour``,
#: ``marker``), handed out in the registry's order, each one no other mode has.
_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
            "tab:pink", "tab:gray", "tab:olive", "tab:cyan")
_MARKERS = ("o", "s", "^", "D", "P", "x", "p", "h", "*", "X", "H", "8")
#: The markers of a one-sided mode's bounds (``MODE-leadS``; 4 is async's own), of its
#: unbounded variant and of every other variant (another bound, a relaxation).
_LEAD_MARKERS = {4: "o", 16: "<", 64: ">"}
_UNBOUNDED, _VARIANT = "v", "d"
_DPI = 100
#: What the figures saved now name at the end of their title (:func:`title_note`).
_NOTE: ContextVar[str | None] = ContextVar("title_note", default=None)


@contextmanager
def title_note(note: str | None) -> Iterator[None]:
    """Within the block, every figure :func:`save` writes ends its title with ``(note)``;
    None adds nothing.

    Parameters
    ----------
    note : str or None
        E.g. ``"relaxation 1"``, of a data file not measured at the defaults.
    """
    token = _NOTE.set(note)
    try:
        yield
    finally:
        _NOTE.reset(token)


def _title_text(fig: Any) -> Any:
    """The text artist of a figure's title: its suptitle, else the title of its one titled
    axes; None when it has neither (no title, or several panels' titles)."""
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text():
        return sup
    titled = [ax.title for ax in fig.axes if ax.get_title()]
    return titled[0] if len(titled) == 1 else None


def figure_title(fig: Any) -> str:
    """A figure's title (:func:`_title_text`), ``""`` when it has none."""
    text = _title_text(fig)
    return "" if text is None else text.get_text()


def _add_note(fig: Any, note: str) -> None:
    """End ``fig``'s title with ``(note)``; a figure without one gets it as its title."""
    text = _title_text(fig)
    if text is None:
        fig.suptitle(f"({note})", fontsize=9)
    else:
        text.set_text(f"{text.get_text()} ({note})")


def save(fig: Any, outdir: Path, stem: str) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` and ``<stem>.pdf`` into ``outdir`` and close it,
    its title ending with the note of :func:`title_note` when there is one."""
    note = _NOTE.get()
    if note:
        _add_note(fig, note)
    return _write(fig, outdir, stem)


def _write(fig: Any, outdir: Path, stem: str) -> list[Path]:
    """Save ``fig`` as PNG (palette-shrunk) and PDF; close it."""
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


def look(mode: str) -> tuple[str, str]:
    """Colour and marker of a registered mode: its algorithm's own, else the first ones no
    other mode has, in the registry's order (so a newly registered mode gets its own)."""
    known = [lookup(name) for name in names()]
    alg = lookup(mode)
    return (_own_or_spare(alg, known, "colour", _COLOURS),
            _own_or_spare(alg, known, "marker", _MARKERS))


def _own_or_spare(alg: Any, known: list, attr: str, pool: tuple[str, ...]) -> str:
    """``alg``'s own ``attr``, or the one of ``pool`` nobody has that falls to it."""
    if getattr(alg, attr):
        return getattr(alg, attr)
    taken = {getattr(a, attr) for a in known}
    spare = [x for x in pool if x not in taken] or list(pool)
    without = [a.name for a in known if not getattr(a, attr)]
    return spare[without.index(alg.name) % len(spare)]


def style(label: str) -> dict:
    """Colour (its mode's, :func:`look`) and marker of a mode or variant (a fresh dict the
    caller may change); ``{}`` for a label of no registered mode."""
    variant = parse(label)
    if variant is None:
        return {}
    colour, marker = look(variant.mode)
    if variant.relax is not None:
        marker = _VARIANT
    elif variant.lead is not None:
        marker = _UNBOUNDED if variant.lead < 0 else _LEAD_MARKERS.get(variant.lead, _VARIANT)
    return dict(color=colour, marker=marker)


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
