"""``bench decompose``: its configurations and the tables and figure drawn from its summary.

No run: the specs are parsed by the real ``simulate`` parser, the tables are drawn from a
summary made by hand, so every number in them is known.
"""

from __future__ import annotations

import pytest

from dssfn_mpi.bench.figures.decomposefig import decompose_figure
from dssfn_mpi.bench.sweeps.decompose import decompose_markdown, decompose_specs
from dssfn_mpi.bench.sweeps.presets import apply_overrides, get_preset
from dssfn_mpi.bench.variants import mode_args, relax_args
from dssfn_mpi.cli import build_parser
from dssfn_mpi.errors import UserError


def _opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_the_sweep_is_every_variant_graph_and_relaxation_and_parses():
    p = get_preset("decompose", "quick")  # M = 6 and 8, relaxations 1 and 1.6
    specs = decompose_specs(p, None)
    assert len({s.group for s in specs}) == len(specs)
    seen = {(s.meta["bench_mode"], s.meta["bench_graph"], s.meta["bench_value"],
             s.meta["bench_relax"]) for s in specs}
    at6 = {(v, g, 6, a) for v in p.modes for g in ("ring", "d8", "complete") for a in (1.0, 1.6)}
    at8 = {(v, g, 8, a) for v in ("sync", "lockstep", "async", "hood-jacobi")
           for g in ("ring", "d8")
           for a in (1.0, 1.6)}
    assert seen == at6 | at8
    parser = build_parser()
    for s in specs:
        assert s.nodes is None and s.train_args[0] == "simulate"
        args = parser.parse_args(s.train_args)  # well formed for the real command
        assert args.stop == "eps:1e-2" and args.nodes == s.meta["bench_value"]
        mode, relax = s.meta["bench_mode"], s.meta["bench_relax"]
        flag = "--relax" if mode.startswith("sync") else "--eta"
        assert _opt(s.train_args, flag) == f"{relax:g}", s.train_args
        assert _opt(s.train_args, "--mode") == {"sync-graph": "sync-graph"}.get(mode, mode)
        graph = s.meta["bench_graph"]
        assert _opt(s.train_args, "--topology") == {"d8": "circular"}.get(graph, graph)


def test_bad_relaxations_and_variants_are_user_errors():
    p = get_preset("decompose", "quick")
    with pytest.raises(UserError, match="lies in"):
        decompose_specs(apply_overrides(p, ["relaxes=1,2.5"]), None)
    with pytest.raises(UserError, match="unknown variant"):
        decompose_specs(apply_overrides(p, ["modes=sync,nope"]), None)
    assert mode_args("sync@1.6") == ["--mode", "sync", "--relax", "1.6"]
    assert mode_args("async-lead0@1.8") == ["--mode", "async", "--max-lead", "0",
                                             "--eta", "1.8"]
    assert relax_args("sync-graph", 1.0) == ["--relax", "1"]
    assert relax_args("hood", 1.0) == ["--eta", "1"]  # not hood's own default step
    with pytest.raises(UserError, match="must be a number"):
        mode_args("async@x")


def _rec(mode, graph, M, alpha, layers, reached=True, secs=0.1):
    return {"ok": True, "mode": mode, "graph": graph, "value": float(M), "relax": alpha,
            "kind": "simulated", "eps_reached": reached, "time_at_eps": secs,
            "activations_per_layer": layers}


def _summary():
    recs = [
        _rec("sync", "d8", 20, 1.0, [5, 15, 18]), _rec("sync", "d8", 20, 1.8, [4, 7, 13]),
        _rec("sync-graph", "d8", 20, 1.0, [5, 16, 20]),
        _rec("sync-graph", "d8", 20, 1.8, [9, 99, 99], reached=False),  # cap: never best
        _rec("lockstep", "d8", 20, 1.0, [9, 30, 48]), _rec("lockstep", "d8", 20, 1.6, [9, 21, 30]),
        _rec("lockstep", "d8", 20, 1.8, [9, 20, 31]),  # 51 as at 1.6: the smaller alpha wins
        _rec("async", "d8", 20, 1.0, [20, 40, 62]), _rec("async", "d8", 20, 1.8, [20, 30, 44]),
        _rec("sync", "ring", 64, 1.0, [5, 20, 20]), _rec("async", "ring", 64, 1.0, [9, 99, 101]),
    ]
    return {"bench": "decompose", "eps": 0.01, "records": recs,
            "info": {"dataset": "satimage", "layers": 2, "stop": "eps:1e-2"}}


def test_the_table_takes_each_variant_at_its_best_relaxation_and_divides():
    md = decompose_markdown(_summary())
    lines = md.splitlines()
    assert lines[0] == ("| M | graph | sync | sync-graph | lockstep | async | "
                        "graph + formulation | asynchrony (edge) |")
    # layers 1-2 summed: sync 20 at 1.8, sync-graph 36 at 1 (1.8 capped), lockstep 51 at 1.6,
    # async 74 at 1.8; factors 51/20, 74/51
    assert lines[2] == "| 20 | d = 8 | 20 (1.8) | 36 (1) | 51 (1.6) | 74 (1.8) | 2.55x | 1.45x |"
    assert lines[3] == "| 64 | ring | 40 (1) | - | - | 200 (1) | - | - |"
    relax = decompose_markdown(_summary(), "relax").splitlines()
    assert relax[0] == "| graph (M = 20) | variant | 1 | 1.6 | 1.8 | best |"
    assert "| d = 8 | sync-graph | 36 | - | cap | 1 |" in relax
    assert "| d = 8 | lockstep | 78 | 51 | 51 | 1.6 |" in relax
    times = decompose_markdown(_summary(), "times").splitlines()
    assert times[0] == "| M | graph | sync [ms] | sync-graph [ms] | lockstep [ms] | async [ms] |"
    assert times[2] == "| 20 | d = 8 | 100.0 | 100.0 (1.00x) | 100.0 (1.00x) | 100.0 (1.00x) |"



def test_the_figure_draws_a_bar_per_factor():
    fig = decompose_figure(_summary())
    bars = [b.get_height() for b in fig.axes[0].patches]
    assert sorted(round(h, 2) for h in bars) == [1.45, 2.55]


def test_with_neighbourhood_consensus_the_graph_and_formulation_split():
    s = _summary()
    s["records"] += [_rec("hood-jacobi", "d8", 20, 1.0, [9, 11, 14]),
                     _rec("hood-lockstep", "d8", 20, 1.0, [9, 12, 18]),
                     _rec("hood", "d8", 20, 1.0, [9, 15, 21])]
    lines = decompose_markdown(s).splitlines()
    assert lines[0].endswith("| async | hood-jacobi | hood-lockstep | hood | graph | "
                             "graph + formulation | formulation | asynchrony (edge) | "
                             "stale z (hood) | asynchrony (hood) |")
    # graph 25/20, formulation 51/25, asynchrony 74/51, stale z 30/25, asynchrony 36/30
    assert lines[2].endswith("| 25 (1) | 30 (1) | 36 (1) | 1.25x | 2.55x | 2.04x | 1.45x | "
                             "1.20x | 1.20x |")
    fig = decompose_figure(s)  # graph x formulation drawn as its two parts
    bars = sorted(round(b.get_height(), 2) for b in fig.axes[0].patches)
    assert bars == [1.2, 1.2, 1.25, 1.45, 2.04]


def test_a_simulated_only_noise_table_has_no_empty_projected_columns():
    from dssfn_mpi.bench.figures.ttefigs import noise_markdown

    runs = (("sync@1.8", "none", 0.1), ("async@1.8", "none", 0.2), ("async@1.8", "slow:5", 0.3))
    recs = [{"ok": True, "mode": m, "kind": "simulated", "case": c, "eps_reached": True,
             "time_at_eps": t} for m, c, t in runs]
    lines = noise_markdown({"records": recs, "info": {}, "network": "shm",
                            "eps": 0.01}).splitlines()
    assert lines[0] == "| case | async@1.8 simulated [s] | sync@1.8 simulated [s] |"
    assert lines[2:4] == ["| no noise | 0.200 | 0.100 |", "| rank 0 x5 | 0.300 | - |"]
