"""A line on standard error every minute of wall time inside a long simulated layer.

A large async layer can take an hour of wall time between two per-layer progress lines;
its heartbeat says how far it has come: the simulated clock, the activations so far and
how many nodes' own stop tests pass. It observes the event loop and never steers it.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Heartbeat"]


class Heartbeat:
    """Print a progress line at most every ``every`` seconds of wall time.

    Parameters
    ----------
    label : str
        What runs, e.g. ``"layer 0 async"``.
    every : float
        Seconds of wall time between lines (<= 0: never print).
    stream : file, optional
        Where the lines go (default: standard error).
    """

    def __init__(self, label: str, every: float = 60.0, stream: TextIO | None = None) -> None:
        self.label, self.every = label, float(every)
        self.stream = stream
        self._t0 = time.perf_counter()
        self._next = self._t0 + self.every if self.every > 0 else float("inf")

    def __call__(self, simulated: float, activations: int, done: int | None,
                 nodes: int) -> None:
        """Print the line if it is due: ``simulated`` seconds reached, ``activations`` run in
        all, ``done`` of ``nodes`` nodes passing their own stop test (None: no stop test)."""
        now = time.perf_counter()
        if now < self._next:
            return
        self._next = now + self.every
        tested = "" if done is None else f", {done} of {nodes} nodes pass their stop test"
        print(f"  {self.label}: simulated {simulated:.4g} s, {activations:,} activations "
              f"({activations / max(nodes, 1):,.0f} per node){tested}, "
              f"wall {now - self._t0:,.0f} s", file=self.stream or sys.stderr, flush=True)
