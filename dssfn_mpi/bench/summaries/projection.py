"""The benchmarks' one door to :mod:`dssfn_mpi.analysis.replay`: projected dedicated-core times.

Every table and figure of a sweep that shows a projected time or a time to
eps gets it from :func:`project_run`, so all of them use the same network,
eps and definitions:

projected time
    ``Projection.total_seconds``: the run's training time replayed from its
    activation trace with one core per rank and messages crossing the named
    network (``shm``, ``ib``, ``eth10`` or ``alpha=S,beta=B``).
time to eps
    ``total_seconds - (solve_seconds - time_to_eps)`` of the **last layer**:
    the projected training time cut where every rank's snapshot of the last
    layer is within ``eps`` (relative Frobenius distance) of that layer's
    exact solution O*, i.e. the projected moment, from the run's start, at
    which the trained network's output layer is within eps (replay's last
    layer ends the run, and its solve is timed from its first activation).
    NaN when the last layer never got there in K activations, and when there
    is no O* (``--no-check``). Earlier layers
    count with their full projected time: they are what the last layer's
    features are made of, and layer 0 (badly conditioned) often stays above
    eps although the network is accurate.

A run without a trace (central mode, sweep files from before traces, or
``--trace-limit 0``) projects to ``None``: its numbers are NaN, never an error.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

from ...errors import UserError
from ...runlog import RunLog
from ..variants import decentralized

__all__ = ["DEFAULT_EPS", "DEFAULT_NETWORK", "check_network", "has_trace", "project_run",
           "run_time_to_eps"]

#: Network of every projection unless ``--network`` says otherwise.
DEFAULT_NETWORK = "shm"
#: Target relative distance to O* of the time to eps (replay's default).
DEFAULT_EPS = 1e-2

# (id(run), network, eps, slow, jitter, seed) -> (weak reference to run, Projection or None).
# Tables and figures of one plot ask for the same projection many times.
_CACHE: dict[tuple, tuple[Any, Any]] = {}


def has_trace(run: RunLog) -> bool:
    """Whether ``run`` carries an activation trace that replay can read."""
    if not decentralized(str(run.attrs.get("mode", ""))):
        return False
    trace = getattr(run, "trace", None)
    attrs = getattr(run, "trace_attrs", None) or {}
    return bool(trace) and bool(attrs.get("recorded", True))


def check_network(name: str) -> Any:
    """Parse ``--network`` (a user error if malformed); returns replay's ``Network``."""
    from ...analysis import replay

    return replay.parse_network(name)


def _forget(key: tuple) -> None:
    _CACHE.pop(key, None)


def project_run(run: RunLog, network: str = DEFAULT_NETWORK, *,
                slow: dict[int, float] | None = None, jitter: str | None = None,
                seed: int = 0, eps: float = DEFAULT_EPS) -> Any:
    """``replay.project`` of one run, or None when it has no usable trace.

    Parameters
    ----------
    run : RunLog
        One run of a sweep file or a run log.
    network : str
        Network name or ``alpha=S,beta=B`` (``replay.parse_network``).
    slow : dict of int to float, optional
        Ranks to slow down in the projection (replay's ``--slow``).
    jitter : str, optional
        ``exp:MEAN`` or ``lognormal:SIGMA`` (replay's ``--jitter``).
    seed : int
        Seed of the jitter.
    eps : float
        Target relative distance for the time to eps.

    Returns
    -------
    dssfn_mpi.analysis.replay.Projection or None
        None for a run without a trace, or whose trace replay refuses (a
        ``UserError`` such as a run log written without a trace).

    Raises
    ------
    UserError
        A malformed ``network`` or ``jitter`` (checked only when there is a
        trace to project).
    """
    if not has_trace(run):
        return None
    slow_key = tuple(sorted((int(k), float(v)) for k, v in (slow or {}).items()))
    key = (id(run), network, float(eps), slow_key, jitter, int(seed))
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is run:
        return hit[1]
    from ...analysis import replay

    net = replay.parse_network(network)
    jit = replay.parse_jitter(jitter) if jitter else None
    try:
        proj = replay.project(run, net, slow=dict(slow_key) or None, jitter=jit, seed=int(seed),
                              eps=float(eps))
    except UserError:
        proj = None  # e.g. a trace skipped for its size: no projection, not an error
    _CACHE[key] = (weakref.ref(run, lambda _ref, key=key: _forget(key)), proj)
    return proj


def run_time_to_eps(proj: Any) -> float:
    """The run's time to eps (module docstring) from a ``Projection``; NaN if not reached.

    Parameters
    ----------
    proj : dssfn_mpi.analysis.replay.Projection or None

    Returns
    -------
    float
        Seconds, or NaN (no projection, no layers, or the last layer never
        within eps).
    """
    if proj is None or not proj.layers:
        return math.nan
    last = proj.layers[-1]
    if last.time_to_eps is None or not math.isfinite(last.time_to_eps):
        return math.nan
    return float(proj.total_seconds - (last.solve_seconds - last.time_to_eps))
