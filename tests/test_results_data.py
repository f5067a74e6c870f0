"""The committed result data, the one build from it, and the figures at equal accuracy.

No MPI and no replay: summaries are built by hand or from the made-up runs of
tests/benchfakes.py, so every plotted number is known.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from figstub import no_rendering

from dssfn_mpi.bench.pages import mdtables, resultsdir
from dssfn_mpi.errors import UserError

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "results" / "data"
PAGE = REPO / "BENCHMARKS.md"


# ------------------------------------------------------------------ the committed data


def test_results_page_tables_are_what_the_data_give():
    text = PAGE.read_text()
    assert mdtables.blocks(text), "BENCHMARKS.md has no table generated from results/data"
    assert mdtables.differences(text, DATA) == []


def test_readme_answer_and_every_page_are_what_the_data_give():
    for page in resultsdir.PAGES:
        text = (REPO / page).read_text()
        assert mdtables.differences(text, DATA) == [], page
    readme = (REPO / "README.md").read_text()
    assert any(name == "answer" and view == "readme"
               for _s, _e, name, view in mdtables.blocks(readme))
    assert any(name == "answer" and view == "brief"
               for _s, _e, name, view in mdtables.blocks(PAGE.read_text()))


def test_an_edited_number_in_the_answer_is_caught():
    readme = (REPO / "README.md").read_text()
    start, end, _name, _view = next(b for b in mdtables.blocks(readme) if b[2] == "answer")
    lines = readme.splitlines()
    row = next(i for i in range(start + 1, end) if re.search(r"\d\.\d", lines[i]))
    lines[row] = re.sub(r"(\d)\.(\d)", r"9\1.\2", lines[row], count=1)  # one number changed
    edited = "\n".join(lines) + "\n"
    assert mdtables.differences(edited, DATA) == [f"answer readme (line {start + 1})"]
    assert mdtables.render(edited, DATA) == readme


def test_the_answer_is_computed_from_unrounded_data(tmp_path):
    from dssfn_mpi.bench.pages import answer

    got = answer.facts(DATA)
    s = answer.load(DATA)
    live = {(r["mode"], r["value"]): r["time_at_eps"] for r in s["degree_tte"]["records"]
            if r["kind"] == "live" and r.get("ok")}
    ratios = [live[("sync", d)] / live[("async", d)] for m, d in live if m == "async"]
    assert got["deg"] == f"{min(ratios):.2f} - {max(ratios):.2f}"
    # a changed datum changes the text: d = 8's async run made 10x slower
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    summary = json.loads((data / "degree_tte.json").read_text())
    for r in summary["records"]:
        if (r["kind"], r["mode"], r["value"]) == ("live", "async", 8.0):
            r["time_at_eps"] *= 10
    (data / "degree_tte.json").write_text(json.dumps(summary))
    assert answer.facts(data)["deg"] != got["deg"]
    assert answer.facts(data)["sg_ring"] == got["sg_ring"]
    with pytest.raises(UserError, match="no answer view"):
        answer.answer_markdown(DATA, "nonesuch")
    (data / "noise.json").unlink()
    with pytest.raises(UserError, match="noise.json: no such data file"):
        answer.answer_markdown(data, "readme")


def test_the_short_views_agree_with_the_full_tables():
    full = mdtables.table_for(DATA, "contention.json").splitlines()
    short = mdtables.table_for(DATA, "contention.json", "slowdown").splitlines()
    cells = {}  # (mode, wait, busy) -> (solve, slowdown) of the full table
    for line in full[2:]:
        if not line.startswith("| "):
            break
        c = [x.strip() for x in line.strip("|").split("|")]
        cells[(c[0], c[1], c[2])] = (c[4], c[5])
    rows = [ln for ln in short[2:] if ln.startswith("| ")]
    assert len(rows) * 3 == len(cells)
    for line in rows:
        mode, wait, *times = [x.strip() for x in line.strip("|").split("|")]
        assert times[0] == cells[(mode, wait, "0")][0]
        for busy, cell in zip(("1", "2"), times[1:]):
            solve, slow = cells[(mode, wait, busy)]
            assert cell == f"{solve} ({slow}x)"
    both = mdtables.table_for(DATA, "table2.json")
    acc = mdtables.table_for(DATA, "table2_L20.json", "accuracy")
    times = mdtables.table_for(DATA, "table2.json", "times")
    assert times.split("\n\nPaper rows")[0] in both and "central acc" not in times
    assert "central acc" in acc and "sync proj." not in acc
    live = mdtables.table_for(DATA, "time_to_eps.json", "live").splitlines()
    sim = mdtables.table_for(DATA, "time_to_eps.json", "simulated").splitlines()
    every = mdtables.table_for(DATA, "time_to_eps.json").splitlines()
    assert every == live + sim[2:] and all("simulated" in ln for ln in sim[2:])
    with pytest.raises(UserError, match="no table view 'slowdown'"):
        mdtables.table_for(DATA, "degree.json", "slowdown")


def test_an_edited_number_in_a_generated_table_is_caught(tmp_path):
    text = PAGE.read_text()
    start, end, name, _view = next(b for b in mdtables.blocks(text) if b[2].endswith(".json"))
    lines = text.splitlines()
    row = next(i for i in range(start + 3, end) if any(c.isdigit() for c in lines[i]))
    cells = lines[row].split("|")
    cells[2] = " 9" + cells[2].strip() + " "  # one number of the row changed
    lines[row] = "|".join(cells)
    edited = "\n".join(lines)
    assert mdtables.differences(edited, DATA) == [f"{name} (line {start + 1})"]
    # regenerating restores the page exactly
    assert text.endswith("\n") and mdtables.render(edited + "\n", DATA) == text


def test_manifest_records_every_file_within_the_budget():
    manifest = resultsdir.read_manifest(DATA)
    on_disk = {p.name for p in DATA.iterdir()} - {resultsdir.MANIFEST}
    assert set(manifest["files"]) == on_disk
    for name, entry in manifest["files"].items():
        assert entry["kind"] == resultsdir.file_kind(DATA / name), name
        assert entry["command"] and entry["made"] and entry["machine"], name
        assert entry["bytes"] == (DATA / name).stat().st_size, f"{name} changed: --add it again"
        for published in entry["figures"].values():
            assert (REPO / "docs" / "figures" / f"{published}.png").is_file(), published
    assert resultsdir.total_bytes(DATA) <= manifest["budget_bytes"] <= 20_000_000


def test_add_and_build_from_a_data_folder(tmp_path):
    src = DATA / "oneshot_cost.json"
    data = tmp_path / "data"
    resultsdir.add_file(data, src, "python -m dssfn_mpi.bench.micro.oneshot",
                        {"oneshot_cost": "cost"}, machine_note="quiet")
    entry = resultsdir.read_manifest(data)["files"]["oneshot_cost.json"]
    assert entry["kind"] == "oneshot" and entry["machine"]["cpus"] >= 1
    assert entry["machine"]["note"] == "quiet"
    written = {p.name for p in resultsdir.build_figures(data, tmp_path / "fig")}
    assert written == {"cost.png", "cost.pdf"}
    manifest = json.loads((data / resultsdir.MANIFEST).read_text())
    manifest["files"]["oneshot_cost.json"]["figures"] = {"nonesuch": "x"}
    (data / resultsdir.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="draws no figure 'nonesuch'"):
        resultsdir.build_figures(data, tmp_path / "fig")
    manifest["budget_bytes"] = 10
    (data / resultsdir.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="budget"):
        resultsdir.add_file(data, src, "x", {}, name="again.json")
    (tmp_path / "raw.json").write_text("{}")
    with pytest.raises(UserError, match="neither a sweep summary"):
        resultsdir.add_file(data, tmp_path / "raw.json", "x", {})


def test_a_pinned_relaxation_is_read_from_the_manifest_command():
    pinned = resultsdir.pinned_relaxation
    assert pinned("dssfn-mpi bench degree --preset mid --out d.h5") is None
    assert pinned("dssfn-mpi bench decompose --set relaxes=0.6,1,1.6") is None
    assert pinned("dssfn-mpi bench degree --set relax=1 --out d.h5") == "relaxation 1"
    assert pinned("simulate ... with --eta 1 (async) or --relax 1 (sync))") == "relaxation 1"
    assert pinned("--set relax=1.8; then --eta=1.2.") == "relaxation 1.2 and 1.8"


def test_every_figure_of_a_pinned_file_names_its_relaxation(tmp_path, monkeypatch):
    no_rendering(monkeypatch)  # each "PNG" holds its figure's title
    data = tmp_path / "data"
    for name, command in (("default.json", "dssfn-mpi bench x"),
                          ("pinned.json", "dssfn-mpi bench x --set relax=1.2")):
        resultsdir.add_file(data, DATA / "oneshot_cost.json", command, {"oneshot_cost": name},
                            name=name)
    resultsdir.build_figures(data, tmp_path / "few")
    assert (tmp_path / "few" / "pinned.json.png").read_text().endswith("(relaxation 1.2)")
    assert "relaxation" not in (tmp_path / "few" / "default.json.png").read_text()
    # every committed figure: its title names its file's pinned relaxation, or none
    resultsdir.build_figures(DATA, tmp_path / "fig")
    for name, entry in resultsdir.read_manifest(DATA)["files"].items():
        note = resultsdir.pinned_relaxation(entry["command"])
        for published in entry["figures"].values():
            title = (tmp_path / "fig" / f"{published}.png").read_text()
            if note:
                assert title.endswith(f"({note})"), f"{published} ({name}): {title!r}"
            else:
                assert "(relaxation " not in title, f"{published} ({name}): {title!r}"


# ------------------------------------------------------------------ equal accuracy


def _rec(mode, value, t, reached=True, kind="live", **kw):
    rec = {"name": f"{kind}-{mode}-{value}", "mode": mode, "kind": kind, "value": float(value),
           "ok": True, "status": "ok", "time_at_eps": t, "train_seconds": 10 * t,
           "eps_reached": reached, "dataset": "satimage", "case": "none"}
    rec.update(kw)
    return rec


def _summary(bench, records):
    return {"format": "dssfn-mpi sweep summary", "version": 1, "bench": bench,
            "network": "shm", "eps": 1e-2, "records": records, "tables": {},
            "info": {"dataset": "satimage", "datasets": ["satimage"], "nodes": 20,
                     "degree": 8, "layers": 2, "hidden": 1012, "iters": 3000,
                     "stop": "eps:1e-2"}}


def _unreached_points(fig):
    return [tuple(xy) for ax in fig.axes for line in ax.get_lines()
            if line.get_gid() == "unreached" for xy in line.get_xydata()]


def test_unreached_points_are_drawn_hollow_not_dropped():
    from dssfn_mpi.bench.figures import ttefigs
    from dssfn_mpi.bench.figures.figstyle import plt

    recs = [_rec("async", 2, 0.9, reached=False), _rec("async", 8, 0.3),
            _rec("sync", 2, 0.2), _rec("sync", 8, 0.2),
            _rec("async", 2, 0.8, kind="simulated"), _rec("async", 8, 0.25, kind="simulated"),
            _rec("oneshot", 2, 0.5), _rec("oneshot", 8, 0.5)]
    summary = _summary("degree", recs)
    fig = ttefigs.sweep_tte_figure(summary)
    # the unreached async point at d = 2: hollow in the projected and the measured panel
    assert sorted(_unreached_points(fig)) == [(2.0, 0.9), (2.0, 9.0)]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert ttefigs.CAP_NOTE in labels and "async, simulated" in labels
    assert "satimage" in fig._suptitle.get_text() and "1e-2" in fig._suptitle.get_text() \
        or "0.01" in fig._suptitle.get_text()
    plt.close(fig)
    table = ttefigs.tte_markdown(summary)
    row = next(ln for ln in table.splitlines() if ln.startswith("| 2 |"))
    assert "0.900 (cap)" in row and "0.200" in row and "(cap)" not in row.split("0.900")[0]
    assert "failed" not in table


def test_a_failed_run_is_named_failed_not_left_blank():
    from dssfn_mpi.bench.figures import ttefigs
    from dssfn_mpi.bench.summaries.tables import FAILED_NOTE, sweep_markdown

    dead = dict(_rec("sync", 64, math.nan, kind="simulated"), status="failed", ok=False)
    summary = _summary("nodes", [_rec("sync", 20, 0.2), _rec("sync", 20, 0.1, kind="simulated"),
                                 _rec("sync", 64, 0.1), dead])
    table = ttefigs.tte_markdown(summary)
    row = next(ln for ln in table.splitlines() if ln.startswith("| 64 |"))
    assert [c.strip() for c in row.strip("|").split("|")][1:] == ["0.100", "failed", "1.00"]
    assert FAILED_NOTE in table
    # the fixed-K table: a failed live run is a "failed" row cell, its value kept
    live_dead = dict(_rec("async", 8, math.nan), status="failed", ok=False, iters=200)
    fixed = dict(_summary("nodes", [live_dead]), records=[live_dead])
    row = next(ln for ln in sweep_markdown(fixed).splitlines() if ln.startswith("| 8 |"))
    assert row.count("failed") == 4 and FAILED_NOTE in sweep_markdown(fixed)


def test_noise_and_table2_views_mark_unreached_cases():
    from dssfn_mpi.bench.figures import ttefigs
    from dssfn_mpi.bench.figures.figstyle import plt

    recs = [_rec("async", 1, 0.3), _rec("sync", 1, 0.1),
            _rec("async", 5, 2.0, reached=False, case="slow:5"),
            _rec("sync", 5, 0.5, case="slow:5"),
            _rec("sync-graph", 1, 0.7, kind="replay", case="exp:1.0"),
            _rec("async", 5, 1.5, kind="simulated", case="slow:5")]
    summary = _summary("noise", recs)
    fig = ttefigs.noise_figure(summary)
    cases = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert cases == ["no noise", "jitter exp:1.0", "rank 0 x5"]
    assert _unreached_points(fig) == [(2.0, 2.0)]
    plt.close(fig)
    text = ttefigs.noise_markdown(summary)
    assert "| rank 0 x5 | 2.000 (cap) |" in text
    t2 = _summary("table2", [_rec("async", -1, 3.0, reached=False, hidden=1012),
                             _rec("sync", -1, 1.0, hidden=1012),
                             _rec("sync", -1, 0.9, kind="simulated", hidden=1012),
                             _rec("sync", -1, 2.0, dataset="letter", hidden=1052)])
    fig = ttefigs.table2_tte_figure(t2)
    hollow = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "unreached"]
    assert len(hollow) == 2 and all(p.get_facecolor()[3] == 0 for p in hollow)
    # each dataset's own width in the title (not the first run's for all)
    assert "n = 1052 (letter), 1012 (satimage)" in fig._suptitle.get_text()
    plt.close(fig)
    assert "3.000 (cap)" in ttefigs.table2_tte_markdown(t2)


def test_eps_reached_reads_every_layer_and_counts_oneshot_exact():
    import numpy as np
    from benchfakes import traced_run

    from dssfn_mpi.bench.summaries.records import eps_reached

    run = traced_run("async", 2, config={"stop": "eps:1e-2"})
    run.layers["stop_reason"] = np.array([[1, 1], [1, 1]])
    assert eps_reached(run) is True
    run.layers["stop_reason"] = np.array([[3, 1], [1, 1]])  # input layer at the cap
    assert eps_reached(run) is False
    one = traced_run("oneshot", 2, config={"stop": "eps:1e-2"})
    one.layers["stop_reason"] = np.full((2, 2), -1)
    assert eps_reached(one) is True
    assert eps_reached(traced_run("sync", 2)) is None  # --stop iters


def test_a_summary_redraws_what_its_sweep_draws(tmp_path, monkeypatch):
    from benchfakes import install, traced_run

    from dssfn_mpi.bench.figures.plot import plot_file, plot_runs

    install(monkeypatch)
    runs = {f"{m}-d{d:02d}": traced_run(m, 2, bench="degree", bench_mode=m, bench_value=d,
                                        bench_target_iters=4)
            for m in ("async", "sync") for d in (2, 4)}
    (tmp_path / "a").mkdir()
    first = {p.name: p for p in plot_runs(runs, tmp_path / "a")}
    assert "degree.json" in first and "degree_time.png" in first
    again = {p.name for p in plot_file(first["degree.json"], tmp_path / "b")}
    assert again == set(first) - {"degree.json"}
    assert (tmp_path / "a" / "degree.md").read_text() == (tmp_path / "b" / "degree.md").read_text()
    data = json.loads(first["degree.json"].read_text())
    assert all(math.isfinite(r["projected_seconds"]) for r in data["records"])
    assert data["info"]["dataset"] == "digits" and data["machine"]["cpus"] >= 1


# ------------------------------------------------------------------ the sweeps' forms


def test_time_to_eps_form_adds_the_oneshot_baseline_and_simulated_runs():
    from dssfn_mpi.bench.sweeps.presets import get_preset
    from dssfn_mpi.bench.sweeps.specs import eps_form, nodes_specs, simulated_specs

    p = eps_form(get_preset("nodes", "mid"), 1e-2, modes_given=False)
    assert p.stop == "eps:0.01" and p.iters == 3000
    assert {"oneshot", "oneshot-graph", "async", "sync", "sync-graph"} <= set(p.modes)
    live = nodes_specs(p, None)
    assert all("eps:0.01" in s.train_args for s in live if s.nodes)
    sim = simulated_specs("nodes", p, None)
    assert max(int(s.train_args[s.train_args.index("--nodes") + 1]) for s in sim) == 256
    assert all(s.nodes is None and s.train_args[0] == "simulate" for s in sim)
    assert {s.meta["bench_kind"] for s in sim} == {"simulated"}
    kept = eps_form(get_preset("nodes", "mid"), 1e-2, modes_given=True)
    assert "oneshot" not in kept.modes


def test_noise_preset_every_engine_at_the_papers_graph():
    from dssfn_mpi.bench.sweeps.presets import get_preset
    from dssfn_mpi.bench.sweeps.specs import noise_specs

    p = get_preset("noise", "mid")
    assert (p.nodes, p.degree, p.stop, p.values) == (20, 8, "eps:1e-2", (2.0, 5.0, 10.0))
    specs = noise_specs(p, None)
    sims = {(s.meta["bench_mode"], s.meta["bench_case"]) for s in specs
            if s.meta["bench_kind"] == "simulated"}
    cases = {"none", "exp:0.5", "exp:1.0", "slow:2", "slow:5", "slow:10"}
    assert sims == {(m, c) for m in p.modes for c in cases}
    live = {(s.meta["bench_mode"], s.meta["bench_case"]) for s in specs
            if s.meta["bench_kind"] == "live"}
    assert ("sync-graph", "slow:5") not in live and ("sync-graph", "none") in live
    assert ("async", "slow:10") in live and not any(c.startswith("exp") for _m, c in live)
    jit = next(s for s in specs if s.meta["bench_case"] == "exp:0.5")
    assert jit.train_args[jit.train_args.index("--jitter") + 1] == "exp:0.5"


@pytest.mark.parametrize("topology, graph", [
    ("circular", ["--topology", "circular", "--degree", "8"]),
    ("random-regular", ["--topology", "random-regular", "--degree", "8"]),
    ("exponential", ["--topology", "exponential"]),  # its degree is M's
])
def test_noise_runs_live_and_simulated_on_the_graph_set(topology, graph):
    from dssfn_mpi.bench.sweeps.presets import apply_overrides, get_preset
    from dssfn_mpi.bench.sweeps.specs import noise_specs

    p = apply_overrides(get_preset("noise", "mid"), [f"topology={topology}"])
    specs = noise_specs(p, None)
    assert {s.meta["bench_kind"] for s in specs} == {"live", "simulated"}
    for s in specs:
        at = s.train_args.index("--topology")
        assert s.train_args[at:at + len(graph)] == graph, s.train_args
        assert s.train_args.count("--degree") == (topology != "exponential")


def test_noise_refuses_a_graph_it_does_not_run():
    from dssfn_mpi.bench.sweeps.presets import apply_overrides, get_preset
    from dssfn_mpi.errors import UserError

    with pytest.raises(UserError, match="topology=ring: choose one of circular"):
        apply_overrides(get_preset("noise", "mid"), ["topology=ring"])


def test_one_colour_and_marker_per_mode_variants_in_their_modes_colour():
    from dssfn_mpi.algorithms import names
    from dssfn_mpi.bench.figures.figstyle import style

    looks = {mode: style(mode) for mode in names()}
    assert len({s["color"] for s in looks.values()}) == len(looks)
    assert len({s["marker"] for s in looks.values()}) == len(looks)
    # the published figures' look
    assert looks["async"] == {"color": "tab:blue", "marker": "o"}
    assert looks["oneshot-graph"] == {"color": "tab:purple", "marker": "P"}
    for variant, marker in (("async-unbounded", "v"), ("async-lead16", "<"),
                            ("async-lead64", ">"), ("async@1.8", "d")):
        assert style(variant) == {"color": "tab:blue", "marker": marker}
    assert style("sync@1.8") == {"color": "tab:orange", "marker": "d"}
    assert style("hood-lead16")["color"] == looks["hood"]["color"]
    assert style("nope") == {} and style("sync-lead4") == {}  # no mode; sync has no bound


def test_a_newly_registered_mode_gets_a_colour_and_marker_of_its_own():
    from dssfn_mpi.algorithms import ALGORITHMS, names, register
    from dssfn_mpi.algorithms.consensus import ConsensusADMM
    from dssfn_mpi.bench.figures.figstyle import style

    class Relaxed(ConsensusADMM):
        name = "relaxed-sync"
        summary = "over-relaxed consensus ADMM (a test plug-in)"
        relax = 1.6

    alg = register(Relaxed())
    try:
        new = style("relaxed-sync")
        others = [style(mode) for mode in names() if mode != "relaxed-sync"]
        assert new["color"] and new["color"] not in {s["color"] for s in others}
        assert new["marker"] and new["marker"] not in {s["marker"] for s in others}
        assert style("relaxed-sync@1.2")["color"] == new["color"]
        assert style("sync") == {"color": "tab:orange", "marker": "s"}  # the others keep theirs
    finally:
        ALGORITHMS.remove(alg)
    assert style("relaxed-sync") == {}


def test_plot_all_command_checks_and_rebuilds(tmp_path, capsys):
    from dssfn_mpi.cli import main

    page = tmp_path / "B.md"
    shutil.copyfile(PAGE, page)
    readme = tmp_path / "R.md"
    shutil.copyfile(REPO / "README.md", readme)
    assert main(["plot", "--all", "--check", "--page", str(page), str(readme)]) == 0
    text = page.read_text()
    start, _end, name, _view = next(b for b in mdtables.blocks(text) if b[2].endswith(".json"))
    lines = text.splitlines()
    row = next(i for i in range(start + 3, len(lines)) if re.search(r"\d\.\d", lines[i]))
    lines[row] = re.sub(r"(\d)\.(\d)", r"9\1.\2", lines[row], count=1)  # one number edited
    page.write_text("\n".join(lines) + "\n")
    assert main(["plot", "--all", "--check", "--page", str(page)]) == 1
    assert name in capsys.readouterr().err
    readme.write_text(readme.read_text().replace("sync / async", "sync / async 9.99", 1))
    assert main(["plot", "--all", "--check", "--page", str(readme)]) == 1
    assert "answer readme" in capsys.readouterr().err
    # the rewrite from a copy of the data whose manifest draws one figure (every committed
    # figure is drawn by test_every_figure_of_a_pinned_file_names_its_relaxation)
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    manifest = json.loads((data / resultsdir.MANIFEST).read_text())
    for name, entry in manifest["files"].items():
        if name != "oneshot_cost.json":
            entry["figures"] = {}
    (data / resultsdir.MANIFEST).write_text(json.dumps(manifest))
    assert main(["plot", "--all", "--data", str(data), "--page", str(page), str(readme),
                 "--out", str(tmp_path / "f")]) == 0
    assert page.read_text() == PAGE.read_text()
    assert readme.read_text() == (REPO / "README.md").read_text()
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["oneshot_cost.pdf",
                                                                  "oneshot_cost.png"]


# ------------------------------------------------------------------ figures without data yet


def test_every_published_figure_is_drawn_from_data_or_listed_as_pending():
    manifest = resultsdir.read_manifest(DATA)
    drawn = {n for e in manifest["files"].values() for n in e["figures"].values()}
    waiting = manifest.get("pending", {})
    assert not drawn & set(waiting), "a figure drawn from data is still listed as pending"
    for name, entry in waiting.items():
        assert entry["command"].startswith("dssfn-mpi bench "), name
        assert entry["data"].endswith(".json"), name
    published = {p.stem for p in (REPO / "docs" / "figures").glob("*.png")}
    assert published == drawn | set(waiting)
    lines = resultsdir.pending(DATA, REPO / "docs" / "figures")
    assert len(lines) == len(waiting)
    for name, entry in waiting.items():  # each named with the command that makes its data
        assert any(f"{name}.png: no committed data yet" in ln and entry["command"] in ln
                   for ln in lines), name


def test_plot_all_names_a_figure_nobody_draws(tmp_path):
    data = tmp_path / "data"
    resultsdir.add_file(data, DATA / "oneshot_cost.json", "x", {"oneshot_cost": "cost"})
    fig = tmp_path / "fig"
    fig.mkdir()
    (fig / "stray.png").write_bytes(b"")
    assert resultsdir.pending(data, fig) == [f"{fig / 'stray.png'}: not drawn from {data} and "
                                             f"not listed as pending in MANIFEST.json"]
    manifest = json.loads((data / resultsdir.MANIFEST).read_text())
    manifest["pending"] = {"stray": {"data": "s.json", "command": "dssfn-mpi bench s"},
                           "cost": {"data": "c.json", "command": "dssfn-mpi bench c"}}
    (data / resultsdir.MANIFEST).write_text(json.dumps(manifest))
    assert "no committed data yet" in resultsdir.pending(data, fig)[0]
    # adding the data of a pending figure takes it off the list
    resultsdir.add_file(data, DATA / "oneshot_cost.json", "x", {"oneshot_cost": "cost"})
    assert set(resultsdir.read_manifest(data)["pending"]) == {"stray"}


# ------------------------------------------------------------------ the RMA file


def test_rma_tables_and_figures_name_the_write_path(monkeypatch, tmp_path):
    from dssfn_mpi.bench.figures import rmaviews

    rma = DATA / "rma.h5"
    assert resultsdir.read_manifest(DATA)["files"]["rma.h5"]["figures"] == {
        "rma_latency": "rma_latency", "rma_activation": "rma_activation"}
    write = rmaviews.rma_markdown(rma, "write").splitlines()
    assert write[0] == "| Z | bytes | osc=sm, store | osc=sm, put | osc=rdma, put |"
    assert len(write) == 2 + 6 and write[2].startswith("| one double | 8 |")
    read = rmaviews.rma_markdown(rma, "read").splitlines()
    assert len(read) == 2 + 6 * 3 and "| osc=sm, store |" in read[2]
    act = rmaviews.rma_markdown(rma, "activation").splitlines()
    assert len(act) == 2 + 5 * 3
    with pytest.raises(UserError, match="no table view 'nonesuch'"):
        rmaviews.rma_markdown(rma, "nonesuch")
    figs = []
    monkeypatch.setattr(rmaviews, "_save", lambda fig, outdir, stem: figs.append(fig) or [])
    rmaviews.plot_rma(rma, tmp_path)
    latency, activation = figs
    assert "store" in latency._suptitle.get_text() and "MPI_Put" in latency._suptitle.get_text()
    for ax in latency.axes:
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert legend[:3] == ["osc=sm, store", "osc=sm, put", "osc=rdma, put"]
        assert len(legend) == 5  # three measurements, two kinds of line
        for line in ax.get_lines():
            x = line.get_xdata()
            # the one-double floor stands alone: no line across the gap to the first Q
            assert len(x) == 1 or min(x) > 0, line
    titles = [ax.get_title() for ax in activation.axes]
    assert [t.split(":")[0] for t in titles] == ["osc=sm, store", "osc=sm, put", "osc=rdma, put"]


def test_the_same_data_redraw_the_same_files(tmp_path):
    data = tmp_path / "data"
    resultsdir.add_file(data, DATA / "oneshot_cost.json", "x", {"oneshot_cost": "cost"})
    first = {p.name: p.read_bytes() for p in resultsdir.build_figures(data, tmp_path / "a")}
    again = {p.name: p.read_bytes() for p in resultsdir.build_figures(data, tmp_path / "b")}
    assert set(first) == {"cost.png", "cost.pdf"} and first == again
