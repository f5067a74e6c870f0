"""The figures and tables of an RMA file (``dssfn-mpi bench rma``).

Each ``/rma/<label>`` group is one 2-rank measurement of the async engine's
mailbox under one one-sided component and one write path (``write_path``:
``store``, plain stores into a shared window, or ``put``, ``MPI_Put``); every
figure and table names both. Figures: ``rma_latency`` (a write and a read of
one Z against its size) and ``rma_activation`` (an activation's mailbox traffic
against its compute floor). Tables (:func:`rma_markdown`, views ``write``,
``read`` and ``activation``) are what BENCHMARKS.md shows of the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UserError
from .figstyle import plt
from .figstyle import save as _save

__all__ = ["RMA_VIEWS", "plot_rma", "rma_groups", "rma_markdown"]

#: The tables of an RMA file, by view name.
RMA_VIEWS = ("write", "read", "activation")

#: Colour of each measurement, by component and write path.
_COLOURS = {("sm", "store"): "tab:blue", ("sm", "put"): "tab:orange",
            ("rdma", "put"): "tab:green"}
_SIZE_NAMES = {0: "one double", 6: "Q = 6 (satimage)", 10: "Q = 10 (mnist, digits)",
               11: "Q = 11 (vowel)", 26: "Q = 26 (letter)", 102: "Q = 102 (caltech101)"}


def rma_groups(path: Path, f: Any) -> dict[str, Any]:
    """The successful ``/rma/<label>`` groups of an open RMA file.

    Raises
    ------
    UserError
        A file of another schema, or without a successful measurement.
    """
    from ..micro.rma import RMA_SCHEMA_VERSION

    version = int(f.attrs.get("schema_version", 0))
    if version != RMA_SCHEMA_VERSION:
        raise UserError(f"{path}: RMA file of schema {version}, this plot reads schema "
                        f"{RMA_SCHEMA_VERSION}; re-run dssfn-mpi bench rma")
    groups = {label: g for label, g in f["rma"].items() if g.attrs.get("status", "ok") == "ok"
              and "put" in g}
    if not groups:
        raise UserError(f"{path}: no successful RMA measurement in /rma")
    # stores before puts, osc=sm before the others: the engine's one-node path first
    return dict(sorted(groups.items(), key=lambda kv: (_attr(kv[1], "osc") != "sm",
                                                       _attr(kv[1], "write_path") != "store",
                                                       kv[0])))


def _attr(g: Any, key: str) -> str:
    value = g.attrs.get(key, "")
    return value.decode() if isinstance(value, bytes) else str(value)


def _name(g: Any) -> str:
    """``osc=sm, store`` of a group: its component and write path."""
    osc = _attr(g, "osc") or "site"
    return f"osc={osc}, {_attr(g, 'write_path')}"


def _colour(g: Any, k: int) -> str:
    spare = ("tab:red", "tab:purple", "tab:brown")
    return _COLOURS.get((_attr(g, "osc"), _attr(g, "write_path")), spare[k % len(spare)])


def _median_us(g: Any, name: str) -> np.ndarray:
    return np.nanmedian(g[name][()], axis=1) * 1e6


def _size_ticks(g: Any) -> tuple[np.ndarray, list[str]]:
    """x positions of the sizes: the one double apart, then one step per Q."""
    x = np.concatenate([[0.0], 1.5 + np.arange(g["Q"][()].size - 1)])
    labels = [f"{int(b)} B" if q == 0 else f"Q={int(q)}\n{b / 1e3:.0f} kB"
              for q, b in zip(g["Q"][()], g["bytes"][()])]
    return x, labels


def _latency_panel(ax: Any, groups: dict[str, Any], series: tuple[tuple[str, str, str], ...],
                   ) -> None:
    """One line per group and series over the Q sizes; the one-double floor a lone marker
    (no line across the gap between 8 bytes and the smallest Z)."""
    from matplotlib.lines import Line2D

    handles = []
    for k, g in enumerate(groups.values()):
        x, labels = _size_ticks(g)
        colour = _colour(g, k)
        for name, style, _text in series:
            y = _median_us(g, name)
            face = colour if style == "-" else "white"  # hollow: the dashed series' points
            ax.plot(x[1:], y[1:], style, color=colour, marker="o", markersize=4,
                    markerfacecolor=face)
            ax.plot(x[:1], y[:1], linestyle="none", color=colour, marker="o", markersize=4,
                    markerfacecolor=face)
        handles.append(Line2D([], [], color=colour, marker="o", label=_name(g)))
    handles += [Line2D([], [], color="black", linestyle=style, marker="o", markersize=4,
                       markerfacecolor="black" if style == "-" else "white", label=text)
                for _name_, style, text in series]
    ax.set_xticks(x, labels, fontsize=7)
    ax.set(yscale="log", xlabel="size of Z (one double, then Q x (2Q + 1000) doubles)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(handles=handles, fontsize=7)


def _latency(groups: dict[str, Any], outdir: Path) -> list[Path]:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    _latency_panel(axes[0], groups, (("put/in_mpi", "-", "target in MPI"),
                                     ("put/computing", "--", "target computing")))
    _latency_panel(axes[1], groups, (("read/read_all_new", "-", "new write"),
                                     ("read/read_all_unchanged", "--", "nothing new")))
    axes[0].set_ylabel("latency [µs] (median)")
    axes[0].set_title("ZMailbox write of one Z into the neighbour (seqlock)", fontsize=9)
    axes[1].set_title("ZMailbox.read_all of the own window (seqlock)", fontsize=9)
    first = next(iter(groups.values()))
    lib = _attr(first, "mpi_library").split(",")[0]
    fig.suptitle(f"The async engine's mailbox, 2 ranks on one node ({lib}, median of "
                 f"{_attr(first, 'reps')}); write path: store = plain stores into a shared "
                 "window, put = MPI_Put", fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "rma_latency")


def _activation(groups: dict[str, Any], outdir: Path) -> list[Path]:
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 4), squeeze=False,
                             sharey=True)
    for ax, g in zip(axes[0], groups.values()):
        q = g["activation/Q"][()]
        ovh = np.median(g["activation/overhead_seconds"][()], axis=(1, 2)) * 1e3
        cmp_ = np.median(g["activation/compute_seconds"][()], axis=(1, 2)) * 1e3
        x = np.arange(q.size)
        ax.bar(x - 0.2, cmp_, 0.4, color="tab:gray", label="(Q x n) @ (n x n) product")
        ax.bar(x + 0.2, ovh, 0.4, color="tab:blue",
               label=f"8 read_all + 8 writes ({_attr(g, 'write_path')})")
        for xi, o, c in zip(x, ovh, cmp_):
            ax.annotate(f"{100 * o / c:.0f}%", (xi + 0.2, o), ha="center", va="bottom",
                        fontsize=7)
        ax.set_yscale("log")
        ax.set_xticks(x, [f"Q={v}\nn={2 * v + 1000}" for v in q], fontsize=8)
        ax.set_title(f"{_name(g)}: communication vs compute floor", fontsize=9)
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("time per activation [ms] (median, log)")
    fig.tight_layout()
    return _save(fig, outdir, "rma_activation")


def plot_rma(path: Path, outdir: Path) -> list[Path]:
    """``rma_latency`` and ``rma_activation`` (PNG and PDF) of an RMA file into ``outdir``."""
    import h5py

    with h5py.File(path, "r") as f:
        groups = rma_groups(path, f)
        return _latency(groups, outdir) + _activation(groups, outdir)


def _write_table(groups: dict[str, Any]) -> list[str]:
    heads = " | ".join(_name(g) for g in groups.values())
    first = next(iter(groups.values()))
    lines = [f"| Z | bytes | {heads} |", "|---|---|" + "---|" * len(groups)]
    for i, (q, b) in enumerate(zip(first["Q"][()], first["bytes"][()])):
        cells = [" / ".join(f"{_median_us(g, f'put/{s}')[i]:.1f}"
                            for s in ("in_mpi", "computing", "sleeping")) for g in groups.values()]
        size = f"{int(b):,}".replace(",", " ")
        lines.append(f"| {_SIZE_NAMES.get(int(q), f'Q = {q}')} | {size} | "
                     + " | ".join(cells) + " |")
    return lines


def _read_table(groups: dict[str, Any]) -> list[str]:
    lines = ["| Z | measured | read, new write | read_all, new write | read_all, nothing new "
             "| read_all during writes | write during reads | torn copies / fallbacks |",
             "|---|---|---|---|---|---|---|---|"]
    first = next(iter(groups.values()))
    for i, q in enumerate(first["Q"][()]):
        for g in groups.values():
            cells = [f"{_median_us(g, n)[i]:.1f}" for n in
                     ("read/read_new", "read/read_all_new", "read/read_all_unchanged",
                      "contended/read_all_seconds", "contended/put_seconds")]
            torn, fall = g["contended/torn_retries"][()][i], g["contended/fallbacks"][()][i]
            lines.append(f"| {_SIZE_NAMES.get(int(q), f'Q = {q}')} | {_name(g)} | "
                         + " | ".join(cells) + f" | {int(torn)} / {int(fall)} |")
    return lines


def _activation_table(groups: dict[str, Any]) -> list[str]:
    lines = ["| Q | n | measured | 8 read_all + 8 writes [ms] | product [ms] | overhead |",
             "|---|---|---|---|---|---|"]
    first = next(iter(groups.values()))
    for i, q in enumerate(first["activation/Q"][()]):
        for g in groups.values():
            ovh = float(np.median(g["activation/overhead_seconds"][()][i])) * 1e3
            cmp_ = float(np.median(g["activation/compute_seconds"][()][i])) * 1e3
            lines.append(f"| {int(q)} | {2 * int(q) + 1000} | {_name(g)} | {ovh:.3f} | "
                         f"{cmp_:.2f} | {100 * ovh / cmp_:.1f} % |")
    return lines


def rma_markdown(path: Path, view: str | None = None) -> str:
    """A table of an RMA file: ``write`` (default; µs, median: target in MPI / computing /
    sleeping), ``read`` (µs, median) or ``activation`` (ms, median over both ranks).

    Raises
    ------
    UserError
        An unknown view, or a file :func:`rma_groups` refuses.
    """
    import h5py

    make = {"write": _write_table, "read": _read_table,
            "activation": _activation_table}.get(view or "write")
    if make is None:
        raise UserError(f"{path}: no table view {view!r} of an RMA file; one of "
                        f"{', '.join(RMA_VIEWS)}")
    with h5py.File(path, "r") as f:
        return "\n".join(make(rma_groups(path, f)))
