"""The observers are an ordered pipeline: each stage after what it reads (dssfn_mpi.run.observers).

No MPI: the observers are made on a rank-0 state of a 4-node run, never called.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dssfn_mpi.config import TrainConfig
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.run import observers as obs
from dssfn_mpi.run.runstate import RunState
from dssfn_mpi.runlog import schema


def _state(tmp_path, **settings) -> RunState:
    cfg = TrainConfig(**{"dataset": "digits", "mode": "sync", "layers": 2, "iters": 5,
                         **settings})
    comm = SimpleNamespace(Get_rank=lambda: 0, Get_size=lambda: 4)
    empty = np.zeros((0, 0))
    return RunState(cfg=cfg, comm=comm, graph=make_topology("circular", 4, degree=2),
                    meta={"n_classes": 10, "name": "digits", "shard_sizes": [1] * 4},
                    X=empty, y=empty, Xt=empty, yt=empty, T=empty, tt=0.0, hidden=10,
                    eps=1.0, first=0, Os=[], Y=empty, Yt=empty,
                    rows=schema.blank_rows(cfg.layers + 1), checks={}, attrs={},
                    wait_policy=None, history=schema.blank_rows((0, 4)))


@pytest.mark.parametrize("settings", [
    {},
    {"check": False},
    {"out": "run.h5", "save_model": "model.h5"},
    {"out": "run.h5", "check": False, "log_every": 0},
    {"mode": "central"},
])
def test_the_default_pipeline_is_in_order(tmp_path, settings) -> None:
    if "out" in settings:
        settings = {**settings, "out": str(tmp_path / settings["out"])}
    if "save_model" in settings:
        settings = {**settings, "save_model": str(tmp_path / settings["save_model"])}
    pipeline = obs.default_observers(_state(tmp_path, **settings), quiet=True)
    assert isinstance(pipeline, obs.Pipeline)
    kinds = [type(stage) for stage in pipeline]
    assert kinds[:3] == [obs.Evaluation, obs.Equivalence, obs.LogRow]
    assert kinds[-1] is obs.LogWriter
    assert (obs.Checkpointing in kinds) == ("out" in settings)
    assert (obs.ModelSaver in kinds) == ("save_model" in settings)


def test_every_name_read_is_the_loops_or_some_stages() -> None:
    stages = [obs.Evaluation, obs.Equivalence, obs.LogRow, obs.Checkpointing, obs.RankRows,
              obs.Tracing, obs.Progress, obs.ModelSaver, obs.LogWriter]
    obs.check_order(stages)
    written = set(obs.LOOP_PROVIDES).union(*(s.writes for s in stages))
    assert set().union(*(s.reads for s in stages)) <= written
    assert written == _documented_names()  # the module's table: every name, nothing else


def _documented_names() -> set[str]:
    """The first column of the table of names in the module's docstring."""
    lines = obs.__doc__.splitlines()
    rulers = [i for i, line in enumerate(lines) if line.startswith("====")]
    names: set[str] = set()
    for line in lines[rulers[1] + 1:rulers[2]]:
        first = line[:line.index("  ")] if line and not line.startswith(" ") else ""
        names.update(n.strip() for n in first.split(",") if n.strip())
    return names


def test_a_misordered_pipeline_is_refused(tmp_path) -> None:
    state = _state(tmp_path)
    with pytest.raises(ValueError, match=r"LogRow reads 'evaluation' before it is written "
                                         r"\(Evaluation writes it: put it before LogRow\)"):
        obs.Pipeline([obs.LogRow(state), obs.Evaluation(state), obs.Equivalence(state)])
    tracing = obs.Tracing(state)
    with pytest.raises(ValueError, match="LogWriter reads 'history'"):
        obs.Pipeline([obs.Evaluation(state), obs.Equivalence(state), obs.LogRow(state),
                      tracing, obs.LogWriter(state, tracing), obs.RankRows(state)])
    with pytest.raises(ValueError, match="Progress reads 'history'.*no stage writes it"):
        obs.Pipeline([obs.Evaluation(state), obs.Equivalence(state), obs.Progress(state, True)])


def test_a_name_has_one_writer(tmp_path) -> None:
    state = _state(tmp_path)
    with pytest.raises(ValueError, match="Evaluation writes 'evaluation', which Evaluation"):
        obs.Pipeline([obs.Evaluation(state), obs.Evaluation(state)])

    class Rewriter(obs.Observer):
        writes = ("row",)

    with pytest.raises(ValueError, match="writes 'row', which the loop writes already"):
        obs.Pipeline([Rewriter(state)])


def test_the_pipeline_calls_its_stages_in_order(tmp_path) -> None:
    calls: list[str] = []

    class Stage(obs.Observer):
        def __init__(self, name: str) -> None:
            super().__init__(_state(tmp_path))
            self.name = name

        def after_layer(self, step) -> None:
            calls.append(f"{self.name}.after")

        def finish(self) -> None:
            calls.append(f"{self.name}.finish")

    pipeline = obs.Pipeline([Stage("a"), Stage("b")])
    pipeline.after_layer(None)
    pipeline.finish()
    assert calls == ["a.after", "b.after", "a.finish", "b.finish"] and len(pipeline) == 2
