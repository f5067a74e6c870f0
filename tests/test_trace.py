"""Per-activation traces and trajectories (dssfn_mpi.engines.trace, /trace and /trajectory).

The unit tests check the recorder and the run log's groups; the MPI tests run
every mode at 3 ranks on a tiny problem and check what the trace must satisfy
whatever the timing: ordered, non-overlapping activations, CPU within wall time,
the async bounded-delay rule on the versions read, ordered phases, and
trajectories that end exactly at the check's distance.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
from mpitools import run_cli, train_runs

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.engines.trace import PHASES, LayerTrace, TraceTables, snapshot_points, trace_plan
from dssfn_mpi.runlog import append_run, read_runlog, read_sweep, schema, write_runlog
from dssfn_mpi.ssfn.equivalence import relative_distance

PROBLEM = {"dataset": "synthetic", "dataset_options": {"n_train": 300, "n_test": 100},
           "layers": 2, "hidden": 30, "seed": 3}
NODES, ITERS, LEAD = 3, 60, 2
MODES = ("async", "sync", "sync-graph")


# --------------------------------------------------------------------------- unit tests


def test_snapshot_points_end_at_the_last_activation() -> None:
    assert snapshot_points(200, 10).tolist() == list(range(10, 201, 10))
    assert snapshot_points(7, 3).tolist() == [3, 6, 7]
    assert snapshot_points(5, 20).tolist() == [5]


def test_layer_trace_records_times_versions_snapshots_and_distances() -> None:
    tr = LayerTrace(iters=5, degree=2, snapshot_every=2, origin=10.0)
    for k in range(5):
        tr.activation(k, 10.0 + k, 10.5 + k, 0.25, versions=np.array([k, k + 1]))
        tr.snapshot(k, np.full((2, 3), float(k)))
    tr.phase("factor", 9.0, 9.5, 0.4)
    O_star = np.ones((2, 3))
    ex = tr.export(width=3, O_star=O_star)
    assert ex["start"].tolist() == [0, 1, 2, 3, 4] and ex["end"][-1] == 4.5
    assert ex["versions"][:, :2].tolist() == [[k, k + 1] for k in range(5)]
    assert np.all(ex["versions"][:, 2] == -1) and np.all(np.isnan(ex["comm_start"]))
    i = PHASES.index("factor")
    assert (ex["phase_start"][i], ex["phase_end"][i], ex["phase_cpu"][i]) == (-1.0, -0.5, 0.4)
    assert np.all(np.isnan(np.delete(ex["phase_start"], i)))
    # Snapshots after activations 2, 4 and 5 (k = 1, 3, 4), copies of O at that time.
    want = [relative_distance(np.full((2, 3), k), O_star) for k in (1, 3, 4)]
    assert ex["rel_distance"].tolist() == want and tr.snapshots is None


def test_layer_trace_without_recording_keeps_only_snapshots() -> None:
    tr = LayerTrace(iters=4, degree=1, snapshot_every=2, record=False)
    for k in range(4):
        tr.record_activation(k, np.full(2, k + 1.0), 0.0, 0.0, versions=np.array([1]))
    tr.phase("features", 0.0, 1.0, 1.0)
    ex = tr.export(width=1, O_star=np.zeros(2) + 4.0)
    assert ex["start"].size == 0 and np.all(np.isnan(ex["phase_start"]))
    assert ex["rel_distance"].tolist() == [0.5, 0.0]
    assert np.all(np.isnan(tr.export(1, None)["rel_distance"]))


def test_the_size_limit_decides_whether_the_trace_is_recorded() -> None:
    graph = SimpleNamespace(n_nodes=4, degree=lambda m: 2)

    def cfg(mode: str, limit: float) -> SimpleNamespace:
        return SimpleNamespace(mode=mode, algorithm=lookup(mode), iters=100, layers=9,
                               snapshot_every=0, trace_limit_mb=limit)

    # async: 10 layers x 4 ranks x 100 activations x (4 + 2) x 8 bytes = 192000 bytes.
    assert trace_plan(cfg("async", 0.192), graph).record
    small = trace_plan(cfg("async", 0.19), graph)
    assert not small.record and small.active and "0.19 MB" in small.why
    assert trace_plan(cfg("sync", 0.13), graph).record  # (4 + 0) x 8: 128000 bytes
    assert trace_plan(cfg("sync", 0), graph).why == "--trace-limit 0"
    central = trace_plan(cfg("central", 256), graph)
    assert not central.active and central.layer_trace(2, 0.0) is None
    assert trace_plan(cfg("async", 256), graph).snapshot_every == 5  # K // 20


def _timing(rows: int, m: int, k: int, d: int) -> tuple[dict, dict, dict]:
    plan = SimpleNamespace(active=True, record=True, iters=k, snapshot_every=k // 2, width=d)
    tables = TraceTables(plan, m)  # type: ignore[arg-type]
    for layer in range(1, rows):  # layer 0 "before a resume": not recorded
        exports = []
        for rank in range(m):
            tr = LayerTrace(k, d, k // 2, origin=1.0)
            for i in range(k):
                tr.activation(i, 1.0 + i, 1.5 + i, 0.1 * rank, versions=np.arange(d) + i)
                tr.snapshot(i, np.ones(2) * (k - i))
            exports.append(tr.export(d, np.zeros(2) + 1.0))
        tables.add(layer, exports)
    trace, trajectory = tables.arrays(rows)
    trace["message_bytes"] = np.arange(rows) * 80
    return trace, trajectory, {"recorded": True, "why": "", "phases": list(PHASES)}


def test_runlog_writes_reads_and_appends_the_trace_groups(tmp_path) -> None:
    rows, m, k, d = 3, 2, 4, 2
    trace, trajectory, attrs = _timing(rows, m, k, d)
    assert np.all(np.isnan(trace["start"][0])) and np.all(trace["versions"][0] == -1)
    assert trace["start"][1, 1].tolist() == [0, 1, 2, 3]
    assert trajectory["rel_distance"][2, 0].tolist() == [2.0, 0.0]  # |3 - 1|, |1 - 1|
    layers = {"gamma": np.ones((rows, m))}
    path = tmp_path / "run.h5"
    write_runlog(path, {"nodes": m}, layers, trace=trace, trajectory=trajectory,
                 trace_attrs=attrs)
    run = read_runlog(path)
    assert set(run.trace) == set(trace) and set(run.trajectory) == set(trajectory)
    for name, arr in {**trace, **trajectory}.items():
        got = run.trace.get(name, run.trajectory.get(name))
        np.testing.assert_array_equal(got, arr, err_msg=name)
    assert run.trace_attrs == attrs
    with h5py.File(path) as f:  # every dataset documents itself
        for group in (schema.TRACE, schema.TRAJECTORY):
            for name, ds in f[group].items():
                field = schema.trace_fields(group)[name]
                assert ds.attrs["units"] == field.unit and ds.dtype == field.dtype
                assert ds.attrs["description"] == field.description
    sweep = tmp_path / "sweep.h5"
    append_run(sweep, "one", run.attrs, run.layers, trace=run.trace,
               trajectory=run.trajectory, trace_attrs=run.trace_attrs)
    back = read_sweep(sweep)["one"]
    np.testing.assert_array_equal(back.trace["versions"], trace["versions"])
    assert back.trace_attrs == attrs
    # A file without the groups reads with empty ones; a wrong shape is the caller's bug.
    write_runlog(tmp_path / "old.h5", {"nodes": m}, layers)
    old = read_runlog(tmp_path / "old.h5")
    assert old.trace == {} and old.trajectory == {} and old.trace_attrs == {}
    with pytest.raises(ValueError, match="along L"):
        write_runlog(tmp_path / "bad.h5", {"nodes": m}, layers, trace={"cpu": np.ones((2, m, k))})
    with pytest.raises(ValueError, match="unknown trace dataset"):
        write_runlog(tmp_path / "bad.h5", {"nodes": m}, layers, trace={"x": np.ones((rows, m))})


# --------------------------------------------------------------------------- under mpirun

def _train(tmp, name: str, *args: str, n: int | None = NODES):
    cfg = tmp / "cfg.json"
    cfg.write_text(json.dumps(PROBLEM))
    out = tmp / f"{name}.h5"
    res = run_cli(n, "train", "--config", str(cfg), "--out", str(out), "--quiet",
                  "--iters", str(ITERS), *args)
    assert res.returncode == 0, res.stderr[-3000:]
    return read_runlog(out), res


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each mode's run log; the runs in one job."""
    lead = {"async": ("--max-lead", str(LEAD))}  # the one-sided driver's bound
    runs = {mode: ["--iters", str(ITERS), "--mode", mode, *lead.get(mode, ())]
            for mode in MODES}
    paths = train_runs(tmp_path_factory.mktemp("trace"), NODES, runs, PROBLEM)
    return {mode: read_runlog(path) for mode, path in paths.items()}


@pytest.mark.mpirun
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", MODES)
def test_trace_of_every_mode_is_consistent(runs, mode) -> None:
    run = runs[mode]
    t, L = run.trace, PROBLEM["layers"] + 1
    assert run.trace_attrs["recorded"] and set(run.trace_attrs) == set(schema.TRACE_ATTRIBUTES)
    for name in ("start", "end", "cpu", "comm_start"):
        assert t[name].shape == (L, NODES, ITERS), name
    start, end, cpu = t["start"], t["end"], t["cpu"]
    assert np.all(start >= 0) and np.all(start < end)
    assert np.all(end[..., :-1] <= start[..., 1:])  # one activation after another
    assert np.all(cpu > 0) and np.all(cpu <= end - start + 1e-4)
    # async: the puts began inside the activation (its cpu leaves them out)
    assert np.all((start <= t["comm_start"]) & (t["comm_start"] <= end))
    if mode == "async":
        assert run.trace_attrs["mix_rounds"] == -1
    else:
        assert "versions" not in t
    assert (run.trace_attrs["mix_rounds"] >= 1) == (mode == "sync-graph")
    Q, sizes = run.attrs["n_classes"], t["message_bytes"]
    assert sizes[1] == Q * PROBLEM["hidden"] * 8  # Q x d_l float64 per message
    assert run.trace_attrs["bytes_per_message"] == sizes.max()
    _check_phases(t, mode, start)
    _check_trajectory(run)


def _check_phases(t: dict, mode: str, start: np.ndarray) -> None:
    ps, pe = t["phase_start"], t["phase_end"]
    wait = PHASES.index("parity_wait")
    assert np.all(np.isnan(ps[..., wait])) == (mode != "async")
    for layer in range(ps.shape[0]):
        for m in range(ps.shape[1]):
            ok = ~np.isnan(ps[layer, m])
            s, e = ps[layer, m, ok], pe[layer, m, ok]
            assert np.all(s <= e) and np.all(e[:-1] <= s[1:]), (layer, m, s, e)
            assert e[-1] <= start[layer, m, 0]  # the phases come before the solve
            if layer:
                assert s[0] >= t["end"][layer - 1, m, -1]


def _check_trajectory(run) -> None:
    tj = run.trajectory
    every = max(1, ITERS // 20)
    assert tj["activation"].tolist() == list(range(every, ITERS + 1, every))
    rel = tj["rel_distance"]
    assert rel.shape == (PROBLEM["layers"] + 1, NODES, ITERS // every)
    # The final snapshot is the layer's result: the same number the check logged.
    np.testing.assert_array_equal(rel[..., -1], run.layers["rel_distance"])
    assert np.all(rel[..., -1] < rel[..., 0]), rel[..., [0, -1]]


@pytest.mark.mpirun
@pytest.mark.timeout(300)
def test_async_versions_obey_the_bounded_delay(runs) -> None:
    run = runs["async"]
    v = run.trace["versions"]
    degree = run.ranks["degree"]
    assert v.shape == (PROBLEM["layers"] + 1, NODES, ITERS, degree.max())
    k = np.arange(ITERS)
    for m in range(NODES):
        mine = v[:, m, :, : degree[m]]
        assert np.all(v[:, m, :, degree[m]:] == -1)
        assert np.all(np.diff(mine, axis=1) >= 0)  # a neighbour's versions never go back
        assert np.all(mine.min(axis=2) >= k - LEAD)  # read only when at most LEAD ahead
        assert np.all(mine <= ITERS)  # no more versions than the neighbour's activations
    assert run.trace_attrs["max_lead"] == LEAD


@pytest.mark.mpirun
@pytest.mark.timeout(300)
def test_a_trace_over_the_limit_is_skipped_but_trajectories_stay(tmp_path) -> None:
    run, res = _train(tmp_path, "limited", "--mode", "sync", "--trace-limit", "0.001",
                      "--no-check", "--snapshot-every", "7")
    assert res.stdout.count("note: no per-activation trace recorded") == 1
    assert not run.trace_attrs["recorded"] and "--trace-limit" in run.trace_attrs["why"]
    assert run.trace == {}
    with h5py.File(tmp_path / "limited.h5") as f:
        assert len(f["trace"]) == 0
    assert run.trajectory["activation"].tolist() == [7, 14, 21, 28, 35, 42, 49, 56, 60]
    assert np.all(np.isnan(run.trajectory["rel_distance"]))  # no check, no O*


@pytest.mark.mpirun
@pytest.mark.timeout(300)
def test_central_mode_has_no_trace(tmp_path) -> None:
    run, _ = _train(tmp_path, "central", "--mode", "central", n=None)
    assert run.trace_attrs == {"recorded": False, "why": "central mode has no iterations"}
    assert run.trace == {} and run.trajectory == {}
