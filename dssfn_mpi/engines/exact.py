"""The centralized reference: one process, the exact layer solution."""

from __future__ import annotations

import time

import numpy as np

from ..solver import admm_solve, exact_solve_data
from .base import Engine, LayerProblem, RunContext, SolveStats

# Iterations of the SSFN authors' ADMM (their code's default).
AUTHORS_ADMM_ITERS = 100


class ExactEngine(Engine):
    """The centralized model on all the data (``--mode central``, one rank).

    ``--central-solver exact`` (default) is the ground truth; ``admm`` is the
    SSFN authors' early-stopped ADMM with ``--mu`` (for reproducing the paper).
    """

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def solve(self, prob: LayerProblem) -> tuple[np.ndarray, SolveStats]:
        cfg = self.ctx.cfg
        t0 = time.perf_counter()
        if cfg.central_solver == "admm":
            mu = cfg.mu[min(prob.layer, len(cfg.mu) - 1)]
            # The authors' form is written for the 1/2-scaled cost.
            O = admm_solve(0.5 * prob.G, 0.5 * prob.B, prob.eps, mu, AUTHORS_ADMM_ITERS)
            return O, SolveStats(solve_seconds=time.perf_counter() - t0,
                                 activations=AUTHORS_ADMM_ITERS)
        sol = exact_solve_data(prob.Y, prob.T, prob.eps)
        return sol.O, SolveStats(solve_seconds=time.perf_counter() - t0, activations=1)
