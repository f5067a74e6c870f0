"""Which live driver runs an algorithm: one per driver kind and averaging."""

from __future__ import annotations

from .base import Engine, RunContext

__all__ = ["make_engine"]


def make_engine(ctx: RunContext) -> Engine:
    """Build the driver of ``ctx.cfg.algorithm`` (collective over ``ctx.comm``)."""
    from .async_arock import AsyncEngine
    from .exact import ExactEngine
    from .lockstep import LockstepEngine
    from .oneshot import OneshotEngine
    from .sync_allreduce import SyncAllreduceEngine
    from .sync_graph import SyncGraphEngine

    table = {("one-sided", None): AsyncEngine, ("lockstep", None): LockstepEngine,
             ("consensus", "allreduce"): SyncAllreduceEngine,
             ("consensus", "mixing"): SyncGraphEngine, ("one-shot", "allreduce"): OneshotEngine,
             ("one-shot", "mixing"): OneshotEngine, ("central", None): ExactEngine}
    alg = ctx.cfg.algorithm
    return table[(alg.driver, alg.averaging)](ctx)
