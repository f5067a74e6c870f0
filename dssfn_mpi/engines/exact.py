"""The centralized reference: one process, the central model's layer solve."""

from __future__ import annotations

import time

import numpy as np

from ..ssfn.central import solve_layer
from ..ssfn.solver import AUTHORS_ADMM_ITERS
from .base import Engine, LayerProblem, RunContext, SolveStats

__all__ = ["ExactEngine"]


class ExactEngine(Engine):
    """The centralized model on all the data (``--mode central``, one rank).

    ``--central-solver exact`` (default) is the ground truth; ``admm`` is the
    SSFN authors' early-stopped ADMM with ``--mu`` (for reproducing the paper).
    Both go through :func:`dssfn_mpi.ssfn.central.solve_layer`, so the run equals
    :func:`dssfn_mpi.ssfn.central.train_central` with the same settings.
    """

    direct = True

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def solve(self, prob: LayerProblem, trace: None = None) -> tuple[np.ndarray, SolveStats]:
        # No iterations, so nothing to trace (the run log says so: /trace recorded=False).
        cfg = self.ctx.cfg
        t0 = time.perf_counter()
        O, _ = solve_layer(prob.Y, prob.T, prob.eps, prob.layer, cfg.central_solver, cfg.mu,
                           AUTHORS_ADMM_ITERS, G=prob.G, B=prob.B)
        admm = cfg.central_solver == "admm"
        return O, SolveStats(solve_seconds=time.perf_counter() - t0,
                             activations=AUTHORS_ADMM_ITERS if admm else 1)
