"""Test helpers for the benchmarks' time views: traced runs in memory and a stand-in replay.

``traced_run`` builds a :class:`dssfn_mpi.runlog.RunLog` with a made-up
``/trace`` (only ``cpu``) and ``/trajectory``. ``FakeReplay`` is a small,
exactly predictable stand-in for :mod:`dssfn_mpi.analysis.replay` with its API
(``parse_network``, ``parse_jitter``, ``project``), so the summaries, tables
and figures can be checked number for number without depending on the
replay's own rules (tested in tests/test_replay.py):

- a synchronous layer (sync, sync-graph) takes ``sum_k max_m cpu[m, k]``,
  an async one ``max_m sum_k cpu[m, k]``; network ``ib`` halves every time;
- ``slow`` multiplies a rank's cpu; ``exp:MEAN`` jitter multiplies every
  activation by ``1 + Exponential(MEAN)`` from ``default_rng(seed)``;
- the layer's time to eps is the fraction of its activations done at the
  first snapshot where every rank is within eps, times its solve time.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np

from dssfn_mpi.analysis.network import Network
from dssfn_mpi.analysis.replay import LayerProjection, Projection  # real types, faked numbers
from dssfn_mpi.errors import UserError
from dssfn_mpi.runlog import RunLog

#: Setup time the fake adds before every layer's solve (features, factorisation).
SETUP = 0.5


def parse_network(text: str) -> Network:
    if text not in ("shm", "ib"):
        raise UserError(f"--network {text!r}: unknown")
    return Network(text, 1e-6, 1e9)


def parse_jitter(text: str) -> tuple[str, float]:
    kind, _, value = text.partition(":")
    if kind != "exp":
        raise UserError(f"--jitter {text!r}: unknown")
    return kind, float(value)


def project(run: RunLog, network: Network, slow=None, jitter=None, seed: int = 0,
            eps: float = 1e-2) -> Projection:
    FakeReplay.calls.append((run.source, network.name, dict(slow or {}), jitter, seed))
    if "cpu" not in (getattr(run, "trace", None) or {}):
        raise UserError(f"{run.source} was written without a trace")
    cpu = np.array(run.trace["cpu"], dtype=float)
    for rank, factor in {**(slow or {}),
                         **{int(k): v for k, v in run.config.get("slow", {}).items()}}.items():
        cpu[:, int(rank)] *= float(factor)
    if jitter is not None:
        cpu *= 1 + np.random.default_rng(seed).exponential(jitter[1], cpu.shape)
    scale = 0.5 if network.name == "ib" else 1.0
    traj = getattr(run, "trajectory", None) or {}
    rel, act = traj.get("rel_distance"), traj.get("activation")
    layers, total = [], 0.0
    for i in range(cpu.shape[0]):
        if str(run.attrs["mode"]) == "async":
            solve = cpu[i].sum(axis=1).max() * scale
        else:
            solve = cpu[i].max(axis=0).sum() * scale
        tte = None
        if rel is not None:
            hit = np.flatnonzero((rel[i] <= eps).all(axis=0))
            if hit.size:
                tte = solve * act[hit[0]] / cpu.shape[2]
        layers.append(LayerProjection(i, SETUP + solve, 0.0, solve, tte))
        total += SETUP + solve
    return Projection(network, total, 0.0, layers)


class FakeReplay:
    """Installs the stand-in as ``dssfn_mpi.analysis.replay`` (use :func:`install`)."""

    calls: list = []


def install(monkeypatch) -> types.ModuleType:
    """Make ``from dssfn_mpi import replay`` return the stand-in for one test."""
    import dssfn_mpi.analysis
    from dssfn_mpi.bench.summaries import projection

    mod = types.ModuleType("dssfn_mpi.analysis.replay")
    for name in ("Network", "LayerProjection", "Projection", "parse_network", "parse_jitter",
                 "project"):
        setattr(mod, name, globals()[name])
    FakeReplay.calls = []
    monkeypatch.setitem(sys.modules, "dssfn_mpi.analysis.replay", mod)
    monkeypatch.setattr(dssfn_mpi.analysis, "replay", mod, raising=False)
    monkeypatch.setattr(projection, "_CACHE", {})
    return mod


def traced_run(mode: str, nodes: int, *, cpu: np.ndarray | None = None,
               rel: np.ndarray | None = None, iters: int = 4, layers: int = 2,
               acc: float = 0.9, trace: bool = True, config: dict | None = None,
               **attrs) -> RunLog:
    """A finished run of ``mode`` on ``nodes`` ranks, as read from a sweep file.

    ``cpu`` (layers, nodes, iters) defaults to 0.01 s per activation; ``rel``
    (layers, nodes, 2) is the distance to O* at the snapshots after iters/2
    and iters activations. ``attrs`` are added to the run's attributes
    (``bench_*`` labels, ``bench_target_iters``, ...).
    """
    shape = (layers, nodes)
    cfg = {"mode": mode, "slow": {}, **(config or {})}
    base = {"mode": mode, "nodes": nodes, "degree": 2, "layers": layers - 1, "iters": iters,
            "layers_done": layers, "complete": True, "dataset": "digits", "hidden": 100,
            "config": json.dumps(cfg), "hostnames": json.dumps(["h"] * nodes)}
    base.update(attrs)
    run = RunLog(
        attrs=base,
        layers={"total_seconds": np.full(shape, 1.0), "solve_seconds": np.full(shape, 0.8),
                "wait_seconds": np.full(shape, 0.1), "test_accuracy": np.full(shape, acc),
                "rel_distance": np.full(shape, 1e-3)},
        source=f"mem:{mode}-{nodes}-{attrs.get('bench_value', '')}-"
               f"{attrs.get('bench_pattern', '')}{attrs.get('bench_dataset', '')}",
    )
    if trace and mode != "central":
        run.trace = {"cpu": np.full((layers, nodes, iters), 0.01) if cpu is None else cpu}
        run.trace_attrs = {"recorded": True}
        run.trajectory = {}
        if rel is not None:
            run.trajectory = {"activation": np.array([iters // 2, iters]),
                              "rel_distance": rel}
    return run
