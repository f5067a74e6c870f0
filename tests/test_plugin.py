"""Adding an algorithm is one file: a plug-in from the test tree gets every check and every
figure without an edit elsewhere.

``tests/plugins/relaxed.py`` defines over-relaxed consensus ADMM outside the package and
registers it (docs/EXTENDING.md). The common checks (tests/test_common_checks.py) register
it too and run it live under ``mpirun -n 4`` (through ``tests/plugins/launch.py``) and in
``simulate``, both to the exact centralized solution O* at every layer, re-executed to the
same iterates and bytes. Here: the benchmarks draw it, in a colour and marker of its own.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from dssfn_mpi.algorithms import ALGORITHMS, lookup
from dssfn_mpi.bench.figures import figstyle, timeplots

PLUGINS = Path(__file__).resolve().parent / "plugins"
DATA = Path(__file__).resolve().parents[1] / "results" / "data"


@pytest.fixture
def relaxed():
    """The plug-in, registered in this process for the test (and removed after it)."""
    sys.path.insert(0, str(PLUGINS))
    try:
        import relaxed as module

        ALGORITHMS.append(module.ALGORITHM) if module.ALGORITHM not in ALGORITHMS else None
        yield module.ALGORITHM
    finally:
        sys.path.remove(str(PLUGINS))
        if module.ALGORITHM in ALGORITHMS:
            ALGORITHMS.remove(module.ALGORITHM)


def test_the_plugin_is_registered_as_a_decentralized_mode(relaxed):
    assert lookup("relaxed-sync") is relaxed and relaxed.decentralized  # so the common
    # checks, parametrised over the registry's decentralized modes, run it


def test_bench_degree_draws_the_plugin_in_a_look_of_its_own(relaxed, tmp_path, monkeypatch):
    """The degree sweep's figure from a summary holding plug-in runs (the committed sweep's
    sync runs, relabelled as a sweep with ``--modes relaxed-sync`` records them)."""
    summary = json.loads((DATA / "degree.json").read_text())
    extra = [dict(copy.deepcopy(r), mode="relaxed-sync", name=r["name"] + "-relaxed")
             for r in summary["records"] if r["mode"] == "sync"]
    assert extra
    summary["records"] += extra
    drawn = {}

    def keep(fig, outdir, stem):
        drawn[stem] = fig
        return []

    monkeypatch.setattr(timeplots, "save", keep)
    timeplots.sweep_time_figure(summary, tmp_path)
    lines = [line for ax in drawn["degree_time"].axes for line in ax.get_lines()
             if line.get_label() == "relaxed-sync"]
    assert lines, "the plug-in is not in the figure"
    looks = {(figstyle.style(m)["color"], figstyle.style(m)["marker"])
             for m in ("async", "sync", "sync-graph", "oneshot", "oneshot-graph")}
    own = figstyle.style("relaxed-sync")
    assert (own["color"], own["marker"]) not in looks
    assert lines[0].get_color() == own["color"] and lines[0].get_marker() == own["marker"]
