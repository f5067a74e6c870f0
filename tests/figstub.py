"""Test helper: the benchmarks' figures built but not rendered.

Rendering (``savefig`` to PNG and PDF, then the PNG's palette shrink) is most of
the CPU time of a test that plots a sweep. A test that checks which files a plot
writes, or its tables, needs every figure *built* (that is the view's own code)
but none rendered; :func:`no_rendering` swaps the one writer of every figure,
``dssfn_mpi.bench.figures.figstyle._write``, for :func:`write_placeholders`.
Each view is still rendered for real by one test of a real sweep
(tests/test_benchmarks.py, tests/test_contention.py, tests/test_crossover.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["no_rendering", "write_placeholders"]


def write_placeholders(fig: Any, outdir: Path, stem: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` holding the figure's title; close ``fig``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure a view built; it must have at least one axes with something drawn on it.
    outdir : pathlib.Path
        Existing folder for the files.
    stem : str
        File name without suffix.

    Returns
    -------
    list of pathlib.Path
        The two files, PNG first, as the real writer returns them.
    """
    from dssfn_mpi.bench.figures import figstyle

    assert fig.axes, f"{stem}: a figure without axes"
    assert any(ax.has_data() for ax in fig.axes), f"{stem}: nothing drawn on any axes"
    paths = [outdir / f"{stem}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        path.write_text(figstyle.figure_title(fig) or stem)
    figstyle.plt.close(fig)
    return paths


def no_rendering(monkeypatch: Any, keep: tuple[str, ...] = ()) -> None:
    """Make the benchmark figures go through :func:`write_placeholders`.

    Parameters
    ----------
    monkeypatch : pytest.MonkeyPatch
        The test's own; it undoes the swap at the test's end.
    keep : tuple of str
        Stems of the figures still rendered for real (the ones the test checks).
    """
    from dssfn_mpi.bench.figures import figstyle

    real = figstyle._write

    def write(fig: Any, outdir: Path, stem: str) -> list[Path]:
        return (real if stem in keep else write_placeholders)(fig, outdir, stem)

    monkeypatch.setattr(figstyle, "_write", write)
