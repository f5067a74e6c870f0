"""The committed result data (``results/data/``) and the one build of every figure from it.

The folder holds the small files behind every published figure and results table
(sweep summaries of :mod:`dssfn_mpi.bench.summaries.records`, the one-shot cost JSON, RMA
files), never raw traces, and ``MANIFEST.json``, which says for each file the
command that made it, when, on what machine, its size, and which published
figures (``docs/figures/<name>.png`` and ``.pdf``) are drawn from it::

    {"budget_bytes": 20000000,
     "files": {"degree.json": {"kind": "summary", "command": "dssfn-mpi bench degree ...",
                               "made": "2026-11-25T10:00:00Z", "machine": {...},
                               "bytes": 51234, "figures": {"degree_time": "degree_time",
                                                           "jitter": "degree_jitter"}}}}

``figures`` maps a figure the file's plot draws to the name it is published
under; figures not listed are not published. Published figures whose data are not
in the folder yet are listed under ``pending``, each with the data file it will be
drawn from and the command that makes it::

    "pending": {"degree_time": {"data": "degree.json",
                                "command": "dssfn-mpi bench degree --preset mid ..."}}

``plot --all`` keeps those figures as published and says so (:func:`pending`).
``dssfn-mpi plot --all`` redraws every listed figure (:func:`build_figures`) and
regenerates the marked tables and texts of :data:`PAGES` (:mod:`dssfn_mpi.bench.pages.mdtables`);
``dssfn-mpi plot --add FILE`` records a new or re-measured file (:func:`add_file`).

A file whose MANIFEST command pins a relaxation was not measured at the engines' defaults:
its figures say so at the end of their titles (the rule:
:mod:`dssfn_mpi.bench.pages.manifest`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...errors import UserError, require
from ..summaries.records import COST_KIND, file_kind
from .manifest import BUDGET_BYTES, MANIFEST, pinned_relaxation, read_manifest, relaxation

#: The pages whose marked tables and texts ``plot --all`` regenerates by default
#: (relative to the repository root).
PAGES = ("BENCHMARKS.md", "README.md", "docs/RESULTS.md", "docs/ALGORITHMS.md",
         "docs/REPLAY.md", "docs/SIMULATE.md")

__all__ = ["BUDGET_BYTES", "KINDS", "MANIFEST", "PAGES", "add_file", "build_figures", "file_kind",
           "pending", "pinned_relaxation", "read_manifest", "rebuild", "relaxation",
           "total_bytes"]

#: The kinds of data file, by what draws them.
KINDS = ("summary", COST_KIND, "rma", "accuracy")


def _write_manifest(data_dir: Path, manifest: dict[str, Any]) -> None:
    tmp = data_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    tmp.replace(data_dir / MANIFEST)


def total_bytes(data_dir: str | os.PathLike) -> int:
    """Bytes of every file in the folder."""
    return sum(p.stat().st_size for p in Path(data_dir).iterdir() if p.is_file())


def add_file(data_dir: str | os.PathLike, source: str | os.PathLike, command: str,
             figures: dict[str, str], name: str | None = None,
             machine_note: str | None = None) -> Path:
    """Copy ``source`` into the data folder and record it in the manifest.

    Parameters
    ----------
    data_dir : path
        The folder (``results/data``); created if missing.
    source : path
        A sweep summary, the one-shot cost JSON, an RMA file or the time-to-eps
        summary of ``bench accuracy``.
    command : str
        The command that made the file (with a summary, its sweep's ``bench``
        command), as the manifest records it.
    figures : dict of str to str
        Figure drawn from it -> name published under in docs/figures.
    name : str, optional
        File name in the folder (default: the source's).
    machine_note : str, optional
        What else ran on the machine (e.g. "quiet", "shared: CI beside it"),
        recorded as the entry's ``machine["note"]``.

    Returns
    -------
    pathlib.Path
        The file in the folder.

    Raises
    ------
    UserError
        An unknown kind of file, or the folder would exceed its budget.
    """
    from ..summaries.records import machine, now

    src, folder = Path(source), Path(data_dir)
    kind = file_kind(src)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(folder)
    dest = folder / (name or src.name)
    old = dest.stat().st_size if dest.exists() else 0
    budget = int(manifest.get("budget_bytes", BUDGET_BYTES))
    require(total_bytes(folder) - old + src.stat().st_size <= budget,
            f"{src}: the data folder would exceed its budget of {budget / 1e6:g} MB; keep "
            "summaries, not sweep files")
    made, where = now(), machine()
    if kind in ("summary", "accuracy"):
        data = json.loads(src.read_text())
        made, where = data.get("made", made), data.get("machine", where)
    if machine_note:
        where = {**where, "note": machine_note}
    if src.resolve() != dest.resolve():
        shutil.copyfile(src, dest)
    manifest["files"][dest.name] = {"kind": kind, "command": command, "made": made,
                                    "machine": where, "bytes": dest.stat().st_size,
                                    "figures": dict(figures)}
    waiting = manifest.get("pending", {})
    for published in figures.values():  # drawn from data now
        waiting.pop(published, None)
    _write_manifest(folder, manifest)
    return dest


def _draw(kind: str, path: Path, outdir: Path) -> list[Path]:
    """Every figure of one data file into ``outdir``."""
    if kind == "summary":
        from ..figures.plot import plot_summary
        from ..summaries.records import read_summary

        return plot_summary(read_summary(path), outdir)
    if kind == COST_KIND:
        from ..micro.oneshot import plot

        return plot(json.loads(path.read_text()), outdir)
    if kind == "rma":
        from ..figures.rmaviews import plot_rma

        return plot_rma(path, outdir)
    if kind == "accuracy":
        from ..figures.accuracy import plot_accuracy

        return plot_accuracy(json.loads(path.read_text()), outdir)
    raise UserError(f"{path}: unknown kind {kind!r} in the manifest; one of {', '.join(KINDS)}")


def build_figures(data_dir: str | os.PathLike, fig_dir: str | os.PathLike) -> list[Path]:
    """Redraw every figure the manifest lists into ``fig_dir`` (PNG and PDF), each one
    of a file at a pinned relaxation with it at the end of its title
    (:func:`pinned_relaxation`).

    Raises
    ------
    UserError
        A listed file is missing, or its plot does not draw a figure the
        manifest says it does.
    """
    from ..figures.figstyle import title_note  # matplotlib: only where figures are drawn

    folder, out = Path(data_dir), Path(fig_dir)
    manifest = read_manifest(folder)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, entry in sorted(manifest["files"].items()):
        path = folder / name
        require(path.is_file(), f"{path}: listed in {MANIFEST} but missing")
        if not entry.get("figures"):
            continue  # a file no figure is drawn from (tables only)
        note = pinned_relaxation(entry.get("command", ""))
        with tempfile.TemporaryDirectory() as tmp, title_note(note):
            drawn = {p.stem: p for p in _draw(entry["kind"], path, Path(tmp))}
            for stem, published in entry.get("figures", {}).items():
                require(stem in drawn, f"{path}: its plot draws no figure {stem!r} (it draws "
                        f"{', '.join(sorted(drawn)) or 'none'}); fix figures in {MANIFEST}")
                for ext in ("png", "pdf"):
                    src = drawn[stem].with_suffix(f".{ext}")
                    if src.exists():
                        written.append(Path(shutil.copyfile(src, out / f"{published}.{ext}")))
    return written


def pending(data_dir: str | os.PathLike, fig_dir: str | os.PathLike) -> list[str]:
    """One line per published figure in ``fig_dir`` that no file of the data folder draws:
    the data it waits for and the command that makes them, or that the manifest does not
    know it."""
    manifest = read_manifest(data_dir)
    drawn = {name for entry in manifest["files"].values()
             for name in entry.get("figures", {}).values()}
    waiting = manifest.get("pending", {})
    lines = []
    for png in sorted(Path(fig_dir).glob("*.png")):
        if png.stem in drawn:
            continue
        entry = waiting.get(png.stem)
        if entry is None:
            lines.append(f"{png}: not drawn from {data_dir} and not listed as pending in "
                         f"{MANIFEST}")
        else:
            lines.append(f"{png}: no committed data yet, kept as published; {entry['data']} "
                         f"comes from: {entry['command']} (then plot --add it, "
                         "results/README.md)")
    return lines


def rebuild(data_dir: str | os.PathLike, fig_dir: str | os.PathLike,
            pages: Iterable[str | os.PathLike] = (), check: bool = False) -> int:
    """``dssfn-mpi plot --all``: every figure from the data folder, and the marked tables
    and texts of ``pages`` (the results page, README's answer, the reference pages).

    With ``check``, write nothing: compare the pages' marked blocks with what the data
    give and return 1 (naming them on stderr) when one differs, else 0.
    """
    import sys

    from .mdtables import differences, render

    pages = [Path(p) for p in ([pages] if isinstance(pages, (str, os.PathLike)) else pages)]
    for page in pages:
        require(page.is_file(), f"--page {page}: no such file")
    texts = {page: page.read_text() for page in pages}
    if check:
        diff = [f"{page}: {d}" for page, text in texts.items()
                for d in differences(text, data_dir)]
        for d in diff:
            print(f"{d} is not what the data give (dssfn-mpi plot --all rewrites it)",
                  file=sys.stderr)
        return 1 if diff else 0
    for path in build_figures(data_dir, fig_dir):
        print(path)
    for line in pending(data_dir, fig_dir):
        print(line)
    for page, text in texts.items():
        new = render(text, data_dir)
        if new != text:
            page.write_text(new)
            print(f"{page}: marked tables and texts regenerated")
    return 0
