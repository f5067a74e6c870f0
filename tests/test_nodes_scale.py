"""Fig. 3 at scale: the nodes sweep over several graphs, stopped jobs, the per-graph figure."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from dssfn_mpi import cli
from dssfn_mpi.errors import UserError


def _preset(**changes):
    from dssfn_mpi.bench.sweeps.presets import apply_overrides, get_preset
    from dssfn_mpi.bench.sweeps.specs import eps_form

    p = apply_overrides(get_preset("nodes", "mid"), [f"{k}={v}" for k, v in changes.items()])
    return eps_form(p, 1e-2, modes_given=False)


def _arg(spec, flag):
    args = spec.train_args
    return args[args.index(flag) + 1] if flag in args else None


def test_nodes_sweep_runs_each_degree_where_the_graph_exists():
    from dssfn_mpi.bench.sweeps.specs import nodes_specs, simulated_specs

    p = _preset(degrees="2,8", sim_values="2,8,12,1024", values="4,12")
    sim = simulated_specs("nodes", p, None)
    graphs = {(int(_arg(s, "--nodes")), s.meta["bench_graph"]) for s in sim}
    assert graphs == {(2, "ring"), (8, "ring"), (12, "ring"), (12, "d8"), (1024, "ring"),
                      (1024, "d8")}  # d = 8 needs M > 8
    d8 = [s for s in sim if s.meta["bench_graph"] == "d8"]
    assert all(_arg(s, "--topology") == "circular" and _arg(s, "--degree") == "8" for s in d8)
    assert all(_arg(s, "--topology") == "ring" and _arg(s, "--degree") is None
               for s in sim if s.meta["bench_graph"] == "ring")
    assert len({s.group for s in sim}) == len(sim) == 6 * len(p.modes)
    assert {s.group for s in sim} >= {"sim-async-M012", "sim-async-M012-d08"}
    live = [s for s in nodes_specs(p, None) if s.nodes]
    assert {(s.nodes, s.meta["bench_graph"]) for s in live} == {(4, "ring"), (12, "ring"),
                                                               (12, "d8")}
    assert all(_arg(s, "--iters") == "3000" and _arg(s, "--stop") == "eps:0.01" for s in sim)


def test_a_degree_below_two_is_a_user_error():
    from dssfn_mpi.bench.sweeps.specs import nodes_specs

    with pytest.raises(UserError, match="degree must be >= 2"):
        nodes_specs(_preset(degrees="1"), None)


def test_no_live_dry_run_prints_only_simulations(capsys, tmp_path):
    code = cli.main(["bench", "nodes", "--preset", "mid", "--to-eps", "1e-2", "--no-live",
                     "--values", "2", "--set", "sim_values=16", "--set", "degrees=2,8",
                     "--set", "eps_iters=20000", "--modes", "async", "--dry-run",
                     "--out", str(tmp_path / "n.h5")])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "dssfn" in ln]
    assert code == 0 and len(lines) == 2
    assert all(" simulate " in ln and "--iters 20000" in ln and "--nodes 16" in ln
               for ln in lines)
    assert sum("--topology circular --degree 8" in ln for ln in lines) == 1


def test_a_job_at_its_timeout_is_stopped_with_the_layers_it_finished():
    from dssfn_mpi.bench.sweeps.jobs import JobResult, error_line, job_status

    late = JobResult(-9, 601.0, "", "", timed_out=True)
    half = SimpleNamespace(complete=False, layers_done=2)
    assert job_status(late, half) == "stopped" and job_status(late, None) == "stopped"
    assert error_line(late, 600.0, half) == ("stopped at the job timeout of 600 s after 2 "
                                             "finished layers")
    crashed = JobResult(1, 3.0, "", "error: boom")
    assert job_status(crashed, half) == "failed" and error_line(crashed, 600.0) == "error: boom"
    assert job_status(JobResult(0, 3.0, "", ""), SimpleNamespace(complete=True)) == "ok"


def _rec(mode, M, acts, graph="ring", reached=True, status="ok", rel=(0.009, 0.008, 0.009),
         t=0.5):
    return {"name": f"sim-{mode}-{M}-{graph}", "bench": "nodes", "mode": mode,
            "kind": "simulated", "value": float(M), "ok": status == "ok", "status": status,
            "graph": graph, "stop": "eps:0.01", "layers": 2, "eps_reached": reached,
            "activations_per_layer": list(acts), "rel_per_layer": list(rel),
            "time_at_eps": t, "dataset": "satimage", "hidden": 1012}


def _summary(records):
    return {"format": "dssfn-mpi sweep summary", "version": 1, "bench": "nodes",
            "network": "shm", "eps": 1e-2, "records": records, "tables": {},
            "info": {"dataset": "satimage", "datasets": ["satimage"], "layers": 2,
                     "hidden": 1012, "iters": 3000, "stop": "eps:0.01"}}


def _records():
    return [_rec("async", 16, (60, 90, 120)),
            dict(_rec("async", 256, (3000, 2581, 3000), reached=False, rel=(0.03, 0.009, 0.026)),
                 iters=3000),
            _rec("async", 1024, (3000, 2000), status="stopped", rel=(0.2, 0.05)),
            _rec("sync", 16, (9, 11, 22)), _rec("sync", 256, (24, 39, 69)),
            _rec("sync", 16, (9, 11, 20), graph="d8"), _rec("async", 16, (20, 30, 40), graph="d8"),
            dict(_rec("sync", 1024, ()), status="failed", ok=False, graph="d8"),
            # stopped before its first layer: no run log, so no stop rule or layer count
            dict(_rec("async", 1024, ()), status="stopped", ok=False, graph="d8", stop="iters",
                 layers=0, rel_per_layer=[], time_at_eps=math.nan)]


def test_scale_table_counts_per_node_and_marks_capped_and_stopped_points():
    from dssfn_mpi.bench.figures.scalefig import scale_markdown

    table = scale_markdown(_summary(_records()))
    head, _sep, *rows = table.splitlines()
    assert head == "| M | async (ring) | sync (ring) | async (d8) | sync (d8) |"
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")[1:]]
             for r in rows if r.startswith("| ")}
    assert cells["16"] == ["270, 0.500 s", "42, 0.500 s", "90, 0.500 s", "40, 0.500 s"]
    # its own cap, and the worst layer's distance
    assert cells["256"][0] == "8581 (cap 3000, 3.0e-02), 0.500 s"
    assert cells["1024"] == ["stopped, 2/3 layers: >= 5000", "-", "stopped, no layer", "failed"]


def test_scale_figure_has_a_panel_per_graph_and_marks_each_state():
    from dssfn_mpi.bench.figures.figstyle import plt
    from dssfn_mpi.bench.figures.scalefig import scale_figure

    fig = scale_figure(_summary(_records()))
    top = fig.axes[:2] if fig.axes[0].get_title().startswith("ring") else None
    assert top is not None and "degree 8" in fig.axes[1].get_title()
    ring = fig.axes[0]
    marked = {line.get_gid(): [tuple(p) for p in line.get_xydata()]
              for line in ring.get_lines() if line.get_gid()}
    assert (256.0, 8581.0) in marked["capped"] and marked["stopped"] == [(1024.0, 5000.0)]
    notes = [t.get_text() for t in ring.texts]
    assert "3.0e-02" in notes and "2/3 layers" in notes
    assert ring.get_xscale() == "log" and ring.get_yscale() == "log"
    plt.close(fig)


def test_the_ring_time_table_ignores_other_graphs():
    from dssfn_mpi.bench.figures import ttefigs

    table = ttefigs.tte_markdown(_summary([*_records(), _rec("sync", 1024, (30, 40, 70))]))
    assert table.count("| 16 |") == 1
    # columns: M, async and sync projected (live: none here), then simulated
    row = next(ln for ln in table.splitlines() if ln.startswith("| 1024 |"))
    assert [c.strip() for c in row.strip("|").split("|")][1:5] == ["-", "-", "stopped", "0.500"]
    assert "failed" not in table and ttefigs.STOPPED_NOTE in table  # d = 8's is not the ring's


def test_cap_text_names_one_cap_or_the_range_of_the_runs_caps():
    from dssfn_mpi.bench.figures.ttefigs import cap_text

    recs = [dict(_rec("sync", 16, (9, 11, 22)), iters=10000),
            dict(_rec("async", 16, (60, 90, 120)), iters=100000)]
    assert cap_text(_summary(recs[:1])) == "10000"
    assert cap_text(_summary(recs)) == "10000 - 100000 (per run)"
    assert cap_text(_summary([_rec("sync", 16, (9,))])) == "3000"  # no record names its cap
