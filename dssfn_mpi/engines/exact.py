"""The centralized reference: one process, the exact layer solution."""

from __future__ import annotations

import time

import numpy as np

from ..solver import exact_solve_data
from .base import Engine, LayerProblem, RunContext


class ExactEngine(Engine):
    """Solve each layer exactly on all the data (``--mode central``, one rank)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def solve(self, prob: LayerProblem) -> tuple[np.ndarray, dict[str, float]]:
        t0 = time.perf_counter()
        sol = exact_solve_data(prob.Y, prob.T, prob.eps)
        return sol.O, {"solve_seconds": time.perf_counter() - t0, "activations": 1}
