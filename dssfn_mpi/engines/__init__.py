"""Per-layer decentralized solvers, one module per method.

Every engine is built once per run (collectively) and then called once per
layer on every rank: ``engine.solve(problem) -> (O_m, SolveStats)``. Engines see
only their own rank's statistics and talk to graph neighbours (or, for the
allreduce baseline, to everyone); they never read another rank's data.
"""

from __future__ import annotations

from .base import Engine, LayerProblem, RunContext, SolveStats

__all__ = ["Engine", "LayerProblem", "RunContext", "SolveStats", "make_engine"]


def make_engine(ctx: RunContext) -> Engine:
    """Build the engine named by ``ctx.cfg.mode`` (collective over ``ctx.comm``)."""
    mode = ctx.cfg.mode
    if mode == "async":
        from .async_arock import AsyncEngine

        return AsyncEngine(ctx)
    if mode == "sync":
        from .sync_allreduce import SyncAllreduceEngine

        return SyncAllreduceEngine(ctx)
    if mode == "sync-graph":
        from .sync_graph import SyncGraphEngine

        return SyncGraphEngine(ctx)
    if mode in ("oneshot", "oneshot-graph"):
        from .oneshot import OneshotEngine

        return OneshotEngine(ctx)
    if mode == "central":
        from .exact import ExactEngine

        return ExactEngine(ctx)
    raise ValueError(f"unknown mode {mode!r}")
