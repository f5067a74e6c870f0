"""``bench crossover``: its cases, resuming, the ratio of best sync to best async, the figure.

The ratios and the figure are drawn from records made by hand, so every number is known;
the command runs end to end on digits at M = 4 (a few seconds per case).
"""

from __future__ import annotations

import json
import math

import pytest

from dssfn_mpi import cli
from dssfn_mpi.bench.figures.crossoverfig import crossover_figure, plot_crossover
from dssfn_mpi.bench.pages import mdtables
from dssfn_mpi.bench.summaries.crossratio import (
    best_of,
    crossover_markdown,
    graph_free_spread,
    ratio_rows,
    side_of,
    view_time,
)
from dssfn_mpi.bench.summaries.records import SUMMARY_FORMAT, SUMMARY_VERSION
from dssfn_mpi.bench.sweeps.crossover import (
    FIRST_NOISES,
    GRAPHS,
    MODES,
    NOISES,
    PRESETS,
    case_list,
)

# ------------------------------------------------------------------------------ the cases


def _opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_the_cases_run_first_noise_first_at_each_m_and_parse():
    p = PRESETS["quick"]  # digits, M = 4 and 8
    cases = case_list(p, MODES, list(GRAPHS), list(NOISES), ["ib", "shm"])
    assert len(cases) == 2 * len(p.nodes) * len(GRAPHS) * len(NOISES) * len(MODES)
    assert len({c.key for c in cases}) == len(cases)
    per_m = len(GRAPHS) * len(NOISES) * len(MODES)
    head = len(FIRST_NOISES) * len(GRAPHS) * len(MODES)
    for block in range(2 * len(p.nodes)):  # per network, per M: the first noises first
        mine = cases[block * per_m:(block + 1) * per_m]
        assert len({(c.nodes, c.network) for c in mine}) == 1
        assert {c.noise for c in mine[:head]} == set(FIRST_NOISES)
        assert not {c.noise for c in mine[head:]} & set(FIRST_NOISES)
    assert [c.nodes for c in cases[:2 * per_m:per_m]] == [4, 8]
    parser = cli.build_parser()
    for c in cases[:per_m]:
        args = c.simulate_args(1e-2, p.hidden, None)
        parsed = parser.parse_args(args)  # the real simulate command takes them
        assert parsed.stop == "eps:0.01" and parsed.evaluate is False
        assert parsed.nodes == c.nodes and _opt(args, "--iters") == str(p.cap)
        assert _opt(args, "--mode") == c.mode and _opt(args, "--network") == c.network
        assert "--relax" not in args and "--eta" not in args  # the default relaxations
        assert _opt(args, "--degree") in (None, "3")  # d = 8 at most M - 1
    speeds = next(c for c in cases if c.noise == "speeds:0.1x3")
    assert _opt(speeds.simulate_args(1e-2, None, None), "--speeds") == "0.1:3,0.9:1"


def test_bad_names_are_user_errors(tmp_path, capsys):
    for argv, fragment in ((["--modes", "central"], "decentralized modes only"),
                           (["--modes", "nope"], "--mode 'nope'"),
                           (["--graphs", "ring"], "--graphs 'ring'"),
                           (["--noise", "exp:9"], "--noise 'exp:9'"),
                           (["--redo", "all"], "--redo 'all'")):
        assert cli.main(["bench", "crossover", *argv, "--dry-run"]) == 2
        assert fragment in capsys.readouterr().err
    assert cli.main(["bench", "crossover"]) == 2  # a real run needs --out
    other = tmp_path / "noise.json"
    other.write_text(json.dumps({"format": SUMMARY_FORMAT, "version": SUMMARY_VERSION,
                                 "bench": "noise", "records": []}))
    assert cli.main(["bench", "crossover", "--out", str(other), "--modes", "sync",
                     "--graphs", "exponential", "--noise", "none", "--nodes", "4"]) == 2
    assert "not a crossover one" in capsys.readouterr().err


def test_the_command_resumes_records_a_timeout_and_redoes_it(tmp_path, capsys):
    out = tmp_path / "x.json"
    base = ["bench", "crossover", "--preset", "quick", "--nodes", "4", "--graphs",
            "exponential", "--cap", "30", "--out", str(out)]
    assert cli.main([*base, "--modes", "sync,async", "--noise", "none"]) == 0
    recs = json.loads(out.read_text())["records"]
    # async needs about 40 activations at layer 1: capped at K = 30
    assert [(r["mode"], r["status"], r["eps_reached"], r["layer_eps"]) for r in recs] == [
        ("sync", "ok", True, [True, True]), ("async", "ok", False, [True, False])]
    assert recs[1]["activations_per_layer"][1] == 30
    for r in recs:
        assert len(r["layer_times"]) == 2
        assert r["time_all"] == pytest.approx(sum(r["layer_times"]))
        assert r["time_all"] == pytest.approx(r["sim_total_seconds"])
        assert r["graph_diameter"] == 1 and r["degree"] == 3 and r["net"] == "ib"
        assert r["sim_cpu_seconds"] > 0 and "--network ib" in r["command"]
    assert "2 to run" in capsys.readouterr().out
    # again, with one more noise case: only the new cases run; a timeout is recorded
    assert cli.main([*base, "--modes", "sync", "--noise", "none,slow:10",
                     "--job-timeout", "0.001"]) == 1
    text = capsys.readouterr().out
    assert "1 already in" in text and "1 to run" in text and "STOPPED" in text
    recs = json.loads(out.read_text())["records"]
    assert len(recs) == 3 and recs[-1]["status"] == "stopped" and recs[-1]["case"] == "slow:10"
    assert cli.main([*base, "--modes", "sync", "--noise", "none,slow:10"]) == 0
    assert "0 to run" in capsys.readouterr().out
    assert cli.main([*base, "--modes", "sync", "--noise", "slow:10", "--redo", "failed"]) == 0
    recs = json.loads(out.read_text())["records"]
    assert len(recs) == 3 and recs[-1]["status"] == "ok" and recs[-1]["slow"] == {"0": 10.0}
    (row,) = ratio_rows(json.loads(out.read_text()))  # the case with both sides
    assert row["noise"] == "none" and row["bound"] == "<="  # async at the cap


# ------------------------------------------------------------------------------ the ratio


def _rec(mode, times, at_eps=None, graph="circular-d8", M=16, noise="none", status="ok"):
    return {"mode": mode, "graph": graph, "nodes": M, "value": float(M), "case": noise,
            "dataset": "satimage", "net": "ib", "status": status, "layers": 2,
            "layer_times": list(times), "layer_eps": list(at_eps or [True] * len(times)),
            "eps_reached": all(at_eps or [True]), "degree": 8, "graph_diameter": 2,
            "graph_spectral_gap": 0.3}


def _summary(recs):
    return {"format": SUMMARY_FORMAT, "version": SUMMARY_VERSION, "bench": "crossover",
            "network": "ib", "eps": 0.01, "records": recs,
            "info": {"dataset": "satimage", "layers": 2, "iters": 3000,
                     "graphs": list(GRAPHS), "noises": list(NOISES)}}


def test_the_sides_come_from_the_registry():
    assert side_of("async") == "async" and side_of("hood") == "async"
    assert {side_of(m) for m in ("sync", "sync-graph", "lockstep", "oneshot",
                                 "hood-jacobi")} == {"sync"}
    assert side_of("central") is None and side_of("nonesuch") is None


def test_view_times_and_their_bounds():
    r = _rec("async", [1.0, 2.0, 3.0])
    assert view_time(r, "after_input") == (5.0, False) and view_time(r, "all") == (6.0, False)
    capped0 = _rec("async", [1.0, 2.0, 3.0], [False, True, True])  # the input layer capped
    assert view_time(capped0, "after_input") == (5.0, False)
    assert view_time(capped0, "all") == (6.0, True)
    stopped = _rec("async", [1.0, 2.0], status="stopped")  # timed out in layer 2
    assert view_time(stopped, "after_input") == (2.0, True)
    assert view_time(_rec("async", [1.0], status="stopped"), "after_input") is None
    assert view_time(_rec("async", [1.0, 2.0, 3.0], status="failed"), "all") is None


def test_best_sync_over_best_async_with_capped_runs():
    recs = [_rec("sync", [0.1, 0.4, 0.5]), _rec("sync-graph", [0.1, 0.3, 0.4]),
            _rec("lockstep", [0.1, 0.2, 0.2], [True, False, True]),   # capped, faster: bound
            _rec("oneshot", [0.5, 0.9, 0.9]), _rec("async", [0.2, 0.3, 0.3]),
            _rec("central", [0.01, 0.01, 0.01])]                      # neither side
    best = best_of([r for r in recs if side_of(r["mode"]) == "sync"], "after_input")
    assert (best.mode, best.seconds, best.bound) == ("lockstep", pytest.approx(0.4), True)
    (row,) = ratio_rows(_summary(recs), "after_input")
    assert row["ratio"] == pytest.approx(0.4 / 0.6) and row["bound"] == ">="
    assert row["sync"].mode == "lockstep" and row["async"].mode == "async"
    recs[2] = _rec("lockstep", [0.1, 0.5, 0.5], [True, False, True])  # capped, slower
    (row,) = ratio_rows(_summary(recs), "after_input")
    assert (row["sync"].mode, row["bound"]) == ("sync-graph", "")
    assert row["ratio"] == pytest.approx(0.7 / 0.6)
    recs[4] = _rec("async", [0.2, 0.3, 0.3], [True, True, False])  # async at the cap
    (row,) = ratio_rows(_summary(recs), "after_input")
    assert row["bound"] == "<=" and row["ratio"] == pytest.approx(0.7 / 0.6)
    recs[1] = _rec("sync-graph", [0.1, 0.3, 0.4], [True, True, False])  # both bounded
    assert ratio_rows(_summary(recs), "after_input")[0]["bound"] == "?"
    (row,) = ratio_rows(_summary(recs), "all")  # the input layer counts too
    assert (row["sync"].mode, row["sync"].seconds) == ("sync-graph", pytest.approx(0.8))
    assert row["async"].seconds == pytest.approx(0.8) and row["bound"] == "?"
    recs[1] = _rec("sync-graph", [0.1, 0.3, 0.4])
    assert ratio_rows(_summary(recs), "all")[0]["ratio"] == pytest.approx(0.8 / 0.8)
    # a case with one side only gives no row
    assert ratio_rows(_summary([_rec("sync", [0.1, 0.2, 0.3])])) == []


# ------------------------------------------------------------------------------ the figure


def _fake():
    recs = []
    for M, slow in ((16, 1.0), (64, 2.0), (256, 4.0)):
        for graph in ("circular-d8", "exponential"):
            for noise in ("none", "exp:1.0"):
                recs.append(_rec("sync", [0.1, 0.2, 0.2], graph=graph, M=M, noise=noise))
                capped = (M == 256 and graph == "circular-d8")
                recs.append(_rec("async", [0.1, 0.1 * slow, 0.1 * slow],
                                 [True, True, not capped], graph=graph, M=M, noise=noise))
    return _summary(recs)


def test_the_figure_and_table_from_a_small_summary(tmp_path):
    summary = _fake()
    fig = crossover_figure(summary)
    axes = fig.axes
    assert len(axes) == 4  # 2 views x 2 graphs
    hollow = [ln for ax in axes for ln in ax.get_lines() if ln.get_gid() == "bound"]
    assert sum(len(ln.get_xdata()) for ln in hollow) == 2 * 2  # M = 256 circular, 2 noises
    for ax in axes:
        assert any(list(ln.get_ydata()) == [1.0, 1.0] for ln in ax.get_lines())  # the line at 1
    text = crossover_markdown(summary)
    row = next(ln for ln in text.splitlines() if ln.startswith("| 256 | circular"))
    assert row == "| 256 | circular | 8 | 2 | <=0.50 / <=0.56 | <=0.50 / <=0.56 |"
    assert "| 16 | exponential | 8 | 2 | 2.00 / 1.67 | 2.00 / 1.67 |" in text
    assert "above 1 async is faster" in text
    assert ("Async faster (layers >= 1, ratio above 1): M = 16: 4 of 4 (circular: none, "
            "exp:1.0; exponential: none, exp:1.0); M = 64: 0 of 4; M = 256: 0 of 4.") in text
    assert "sync by up to 0 % (median 0 %, 6 cases)" in text  # the same on each graph
    summary["records"][0]["layer_times"] = [0.1, 0.25, 0.25]  # M = 16 circular none sync
    assert graph_free_spread(summary) == {"sync": [pytest.approx(0.25), 0, 0, 0, 0, 0]}
    assert "sync by up to 25 % (median 0 %, 6 cases)" in crossover_markdown(summary)
    summary = _fake()
    best = crossover_markdown(summary, "best")
    assert "sync 400.0 / async 800.0+" in best
    paths = plot_crossover(summary, tmp_path)
    assert {p.name for p in paths} == {"crossover.md", "crossover.png", "crossover.pdf"}
    data = tmp_path / "data"
    data.mkdir()
    (data / "crossover.json").write_text(json.dumps(summary))
    assert mdtables.table_for(data, "crossover.json") == text
    assert mdtables.table_for(data, "crossover.json", "best") == best
    assert crossover_figure(_summary([_rec("sync", [0.1, 0.2, 0.3])])) is None
    assert math.isfinite(ratio_rows(summary, "all")[0]["ratio"])


def test_another_network_gets_its_own_table_and_dashed_lines():
    summary = _fake()
    eth = [dict(r, net="eth10", layer_times=[t * 2 for t in r["layer_times"]])
           for r in summary["records"] if r["case"] == "none"]
    summary["records"] += [dict(r, mode="sync", layer_times=[0.1, 0.1, 0.1]) if
                           r["mode"] == "sync" else r for r in eth]
    text = crossover_markdown(summary)
    ib, eth10 = text.index("satimage, network ib:"), text.index("satimage, network eth10:")
    assert ib < eth10  # the summary's own network first
    assert "| 16 | circular | 8 | 2 | 0.50 / 0.50 |\n" in text[eth10:]  # its noise cases only
    assert text.count("Async faster") == 2
    fig = crossover_figure(summary)
    dashed = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert [ln.get_label() for ln in dashed] == ["none, eth10"]
