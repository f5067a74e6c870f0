"""Tables of the results page generated from the committed data, so prose cannot drift.

A table in a Markdown page (BENCHMARKS.md) that is made from a data file of
``results/data`` sits between two marker lines naming the file, and optionally a view::

    <!-- table: oneshot_cost.json -->
    | n | statistics [MB] | ... |
    <!-- /table -->

    <!-- table: degree.json jitter -->
    ...
    <!-- /table -->

Prose computed from the data sits between ``text`` markers the same way
(``<!-- text: answer readme -->`` ... ``<!-- /text -->``): the answer of README and
the results page's summary (:mod:`dssfn_mpi.bench.pages.answer`, views ``readme`` and
``brief``), the results page's notes (:mod:`dssfn_mpi.bench.pages.notes`) and the
reference pages' measured numbers (:mod:`dssfn_mpi.bench.pages.refnotes`).

:func:`render` rewrites every such block from its file (``dssfn-mpi plot --all``);
:func:`differences` names the blocks whose text is not what their file gives
(``dssfn-mpi plot --all --check``, and the test that keeps the page honest).
Views: a sweep summary's main table (default) or ``jitter``; a table2 summary's
``accuracy`` or ``times`` table alone; a contention summary's ``slowdown`` table; a
decompose summary's ``times``, ``relax`` or ``defaults`` table; a crossover summary's ``best`` table
(:mod:`dssfn_mpi.bench.summaries.crossratio`); a nodes summary's ``scale`` table
(:mod:`dssfn_mpi.bench.figures.scalefig`); the one-shot cost's ``cost`` table
(default); an RMA file's ``write`` (default), ``read`` or
``activation`` table (:mod:`dssfn_mpi.bench.figures.rmaviews`); the time-to-eps summary's table,
or its ``live`` or ``simulated`` rows.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from pathlib import Path

from ...errors import UserError

__all__ = ["blocks", "differences", "render", "table_for"]

_START = re.compile(r"^<!-- (?P<tag>table|text): (?P<file>\S+)(?: (?P<view>\S+))? -->$")
#: The text blocks, computed from the whole data folder rather than one file.
_TEXTS = ("answer", "notes", "refnotes")


def table_for(data_dir: str | os.PathLike, name: str, view: str | None = None) -> str:
    """The Markdown table of data file ``name`` (and ``view``).

    Raises
    ------
    UserError
        The file is missing, of an unknown kind, or has no such view.
    """
    from ..summaries.records import COST_KIND, file_kind

    if name in _TEXTS:
        module = importlib.import_module(f".{name}", __package__)
        return getattr(module, f"{name}_markdown")(data_dir, view)
    path = Path(data_dir) / name
    if not path.is_file():
        raise UserError(f"{path}: no such data file (a table of the results page names it)")
    kind = file_kind(path)
    if kind == COST_KIND and view in (None, "cost"):
        from ..micro.oneshot import cost_markdown

        return cost_markdown(json.loads(path.read_text()))
    if kind == "summary":
        text = _summary_view(path, view)
        if text is not None:
            return text
    if kind == "rma":
        from ..figures.rmaviews import rma_markdown

        return rma_markdown(path, view)
    if kind == "accuracy" and view in (None, "live", "simulated"):
        from ..figures.accuracy import accuracy_markdown

        return accuracy_markdown(json.loads(path.read_text()), view)
    raise UserError(f"{path}: no table view {view!r} for a file of kind {kind}")


def _summary_view(path: Path, view: str | None) -> str | None:
    """A sweep summary's table: its main one, ``jitter``, a table2 summary's ``accuracy``
    or ``times``, a contention summary's ``slowdown``; None for a view it lacks."""
    from ..figures.plot import summary_markdown
    from ..summaries.jitter import jitter_markdown
    from ..summaries.records import read_summary
    from ..summaries.table2 import table2_markdown
    from ..summaries.tables import slowdown_markdown

    summary = read_summary(path)
    bench = summary["bench"]
    if view is None:
        return summary_markdown(summary)
    if view == "jitter":
        return jitter_markdown(summary)
    if view in ("accuracy", "times") and bench == "table2":
        return table2_markdown(summary, view)
    if view == "slowdown" and bench == "contention":
        return slowdown_markdown(summary)
    if view == "scale" and bench == "nodes":
        from ..figures.scalefig import scale_markdown

        return scale_markdown(summary)
    if view == "best" and bench == "crossover":
        from ..summaries.crossratio import crossover_markdown

        return crossover_markdown(summary, view)
    if view in ("times", "relax", "defaults") and bench == "decompose":
        from ..sweeps.decompose import decompose_markdown

        return decompose_markdown(summary, view)
    return None


def blocks(text: str) -> list[tuple[int, int, str, str | None]]:
    """``(first line, end marker line, file, view)`` of every marked block (0-based).

    Raises
    ------
    UserError
        A block without its end marker.
    """
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = _START.match(lines[i])
        if m:
            end_marker = f"<!-- /{m['tag']} -->"
            try:
                end = lines.index(end_marker, i + 1)
            except ValueError:
                raise UserError(f"line {i + 1}: {m['tag']} block for {m['file']} has no "
                                f"{end_marker}") from None
            out.append((i, end, m["file"], m["view"]))
            i = end
        i += 1
    return out


def render(text: str, data_dir: str | os.PathLike) -> str:
    """``text`` with every marked block regenerated from its data file."""
    lines = text.splitlines()
    for start, end, name, view in reversed(blocks(text)):
        lines[start + 1:end] = table_for(data_dir, name, view).splitlines()
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def differences(text: str, data_dir: str | os.PathLike) -> list[str]:
    """The blocks of ``text`` whose content is not what their data file gives, as
    ``"FILE[ VIEW] (line N)"``; a block whose file is missing counts as different."""
    lines = text.splitlines()
    out = []
    for start, end, name, view in blocks(text):
        label = f"{name}{' ' + view if view else ''} (line {start + 1})"
        try:
            want = table_for(data_dir, name, view).splitlines()
        except UserError as exc:
            out.append(f"{label}: {exc}")
            continue
        if lines[start + 1:end] != want:
            out.append(label)
    return out
