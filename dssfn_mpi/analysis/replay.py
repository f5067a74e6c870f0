"""The dedicated-core timeline of a traced run (``dssfn-mpi replay RUN.h5``).

On a machine with fewer cores than ranks, measured wall time is CPU sharing.
The run log's trace (``/trace``) holds what each activation or iteration
cost in thread CPU time; from it this module computes what the same run
would take with one core per rank and messages crossing a network of latency
alpha and bandwidth beta (:mod:`dssfn_mpi.analysis.network`), by the engines' own
rules. docs/REPLAY.md states the rules, what they assume and what they cannot
capture. Every time here is projected unless its name says ``measured``.

Per rank and layer (layers follow each other on each rank: the untimed
observers between layers are left out), the rules of :mod:`dssfn_mpi.analysis.timeline`,
which the simulator shares: the layer start (features, penalty, the auto
penalty's exchange, async's parity wait, the factorisation), then async's
bounded delay, lockstep's neighbour exchange after every round, sync's
allreduce (by the rule of the MPI library that made the run, its
``mpi_library`` attribute), sync-graph's ``mix_rounds`` neighbour rounds, or
the one-shot modes' exchange of the packed statistics (after the
packing, the ``factor`` phase: one allreduce, or oneshot-graph's
``mix_rounds`` neighbour rounds) then each rank's exact solve (its traced CPU).

What is the trace's own: an async activation is its compute, then its puts
(a put returns once Z is in the neighbour's memory); in traces whose ``cpu``
still includes the run's own puts (no async ``comm_start``), the compute
alone, and the message arrives alpha + bytes/beta after its end. A rank that
ended a layer early (``--stop``) holds nobody back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..algorithms import known, lookup, names
from ..drivers import Penalty
from ..engines.trace import (
    PHASES,  # default order of /trace/phase_* (the attribute ``phases`` rules)
)
from ..errors import UserError
from ..fmt import number
from ..runlog import PathLike, RunLog, is_sweep, read_runlog, read_sweep
from .network import Network, allreduce_library, parse_network
from .timeline import (
    TimingModel,
    hop_distances,
)

__all__ = [
    "LayerProjection",
    "Network",
    "Projection",
    "Trace",
    "draw_jitter",
    "format_projection",
    "jitter_factors",
    "load_run",
    "parse_jitter",
    "parse_network",
    "project",
    "read_trace",
    "report_projection",
    "timeline",
]

#: The traced modes (every decentralized algorithm); central mode has no timeline to replay.
MODES = tuple(n for n in names() if lookup(n).decentralized)


@dataclass
class LayerProjection:
    """One layer of a projection (seconds; ``time_to_eps`` None if never reached)."""

    layer: int
    seconds: float
    measured_seconds: float
    solve_seconds: float
    time_to_eps: float | None


@dataclass
class Projection:
    """A run's projected dedicated-core time under one network."""

    network: Network
    total_seconds: float
    measured_seconds: float
    layers: list[LayerProjection]

    def to_json(self) -> dict[str, Any]:
        """The object ``replay --json`` prints (NaN and inf become null).

        Returns
        -------
        dict
            ``{"network": {"alpha", "beta"}, "total_seconds",
            "measured_seconds", "layers": [{"layer", "seconds",
            "measured_seconds", "solve_seconds", "time_to_eps"}]}``.
        """
        return {
            "network": {"alpha": self.network.alpha, "beta": self.network.beta},
            "total_seconds": _json_number(self.total_seconds),
            "measured_seconds": _json_number(self.measured_seconds),
            "layers": [
                {
                    "layer": lp.layer,
                    "seconds": _json_number(lp.seconds),
                    "measured_seconds": _json_number(lp.measured_seconds),
                    "solve_seconds": _json_number(lp.solve_seconds),
                    "time_to_eps": _json_number(lp.time_to_eps),
                }
                for lp in self.layers
            ],
        }


def _json_number(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


# --------------------------------------------------------------------------- options


def parse_jitter(text: str) -> tuple[str, float]:
    """``--jitter exp:MEAN`` or ``lognormal:SIGMA``.

    Parameters
    ----------
    text
        ``exp:MEAN`` (each activation's compute times 1 + X, X exponential
        with mean MEAN >= 0) or ``lognormal:SIGMA`` (times exp(N(0, SIGMA²)),
        median 1, SIGMA >= 0).

    Returns
    -------
    tuple of (str, float)
        The kind and its parameter.

    Raises
    ------
    UserError
        Anything else.
    """
    kind, sep, value = str(text).partition(":")
    try:
        param = float(value)
    except ValueError:
        param = math.nan
    if not sep or kind not in ("exp", "lognormal") or not math.isfinite(param) or param < 0:
        raise UserError(f"--jitter {text!r}: expected exp:MEAN or lognormal:SIGMA with a "
                        "number >= 0, e.g. exp:0.5")
    return kind, param


def jitter_factors(jitter: tuple[str, float], shape: tuple[int, ...], seed: int) -> np.ndarray:
    """The seeded random factors that multiply each activation's compute.

    Parameters
    ----------
    jitter
        From :func:`parse_jitter`: ``("exp", mean)`` gives ``1 + Exp(mean)``
        (never faster than measured; mean factor ``1 + mean``),
        ``("lognormal", sigma)`` gives ``exp(N(0, sigma²))`` (median 1, mean
        ``exp(sigma² / 2)``; not normalised).
    shape
        ``(layers, M, K)``.
    seed
        Seed of ``numpy.random.default_rng``: the same seed gives the same factors.

    Returns
    -------
    numpy.ndarray
        Factors of the given shape.
    """
    return draw_jitter(np.random.default_rng(seed), jitter, shape)


def draw_jitter(rng: np.random.Generator, jitter: tuple[str, float],
                size: int | tuple[int, ...]) -> np.ndarray:
    """The next ``size`` factors of :func:`jitter_factors` from ``rng``.

    Each factor is drawn in turn, so drawing ``a`` then ``b`` factors gives the same values as
    drawing ``a + b`` at once (the ``exp`` kind with mean 0 draws nothing: its factors are 1).
    """
    kind, param = jitter
    if kind == "exp":
        return 1.0 + rng.exponential(param, size=size) if param > 0 else np.ones(size)
    return np.exp(rng.normal(0.0, param, size=size))


# --------------------------------------------------------------------------- the trace


@dataclass
class Trace:
    """What the timeline needs from a run log, checked (:func:`read_trace`)."""

    mode: str
    layers: list[int]  # run-log layer indices, contiguous
    cpu: np.ndarray  # (L', M, K) compute of each activation / iteration (NaN: not run)
    counts: np.ndarray  # (L', M) activations each rank ran (K unless --stop ended it early)
    phase_cpu: np.ndarray  # (L', M, 3): features, penalty, factor
    neighbors: np.ndarray  # (M, D), padded with -1
    hops: np.ndarray  # (M, M) graph distance
    message_bytes: np.ndarray  # (L',)
    metric_bytes: np.ndarray  # (L',) the layer-start metric exchanges' bytes (0: none)
    max_lead: int | None
    puts_apart: bool  # async: cpu leaves out the puts (comm_start recorded); older logs: no
    mix_rounds: int
    auto_penalty: bool
    activation: np.ndarray | None  # (S,) snapshots: activations done
    rel_distance: np.ndarray | None  # (L', M, S)
    measured: np.ndarray  # (L',) max over ranks of /layers/total_seconds
    allreduce: str = "mpich"  # whose MPI_Iallreduce algorithm (network.allreduce_library)


def _no_trace(run: RunLog) -> UserError:
    return UserError(f"{run.source or 'the run log'} was written without a trace "
                     "(--trace-limit 0 or an older version); rerun it")


def read_trace(run: RunLog) -> Trace:
    """Check a run log and gather the trace arrays of its traced layers.

    The one reader of ``/trace`` for the replay and the simulator's ``trace:``
    speed model.

    Raises
    ------
    UserError
        Central mode, no trace, a damaged trace or no graph, in one line.
    """
    source = run.source or "the run log"
    mode = str(run.attrs.get("mode", ""))
    alg = lookup(mode) if known(mode) else None
    if alg is None or not alg.decentralized:
        raise UserError(f"{source}: mode {mode or '?'} has no parallel timeline; replay needs "
                        "an async, sync, sync-graph, oneshot or oneshot-graph run")
    trace = getattr(run, "trace", None) or {}
    tattrs = getattr(run, "trace_attrs", None) or {}
    if not bool(tattrs.get("recorded", True)):
        raise UserError(f"{source} holds no trace ({tattrs.get('why', 'skipped')}); rerun it")
    if "cpu" not in trace:
        raise _no_trace(run)
    cpu = np.asarray(trace["cpu"], dtype=np.float64)
    m = run.nodes
    if cpu.ndim != 3 or cpu.shape[1] != m:
        raise UserError(f"{source}: /trace/cpu has shape {cpu.shape}, expected (L, {m}, K)")
    layers = _traced_layers(cpu, source)
    phases = list(tattrs.get("phases", PHASES))
    columns = [phases.index(name) for name in ("features", "penalty", "factor")]
    phase_cpu = np.asarray(trace.get("phase_cpu", np.zeros(cpu.shape[:2] + (len(phases),))),
                           dtype=np.float64)[layers][:, :, columns]
    msg = trace.get("message_bytes")
    if msg is None:
        msg = np.full(cpu.shape[0], tattrs.get("bytes_per_message", 0))
    traj = getattr(run, "trajectory", None) or {}
    rel = traj.get("rel_distance")
    neighbors = np.asarray(run.ranks.get("neighbors", np.zeros((m, 0))), dtype=np.int64)
    if neighbors.shape[0] != m or (m > 1 and not (neighbors >= 0).any()):
        raise UserError(f"{source} has no /ranks/neighbors; the graph is needed to replay it")
    total = np.asarray(run.layers["total_seconds"], dtype=np.float64)[layers]
    config = run.config
    return Trace(
        mode=mode,
        layers=layers,
        cpu=cpu[layers],
        counts=np.isfinite(cpu[layers]).sum(axis=2),
        phase_cpu=np.nan_to_num(phase_cpu, nan=0.0),
        neighbors=neighbors,
        hops=hop_distances(neighbors),
        message_bytes=np.asarray(msg, dtype=np.float64)[layers],
        metric_bytes=_metric_bytes(run, layers),
        max_lead=_max_lead(tattrs, config),
        puts_apart=alg.one_sided and "comm_start" in trace and bool(np.isfinite(
            np.asarray(trace["comm_start"], dtype=np.float64)[layers]).any()),
        mix_rounds=_mix_rounds(alg, tattrs, config, source),
        auto_penalty=_auto_penalty(alg, config),
        activation=None if rel is None else np.asarray(traj["activation"], dtype=np.int64),
        rel_distance=None if rel is None else np.asarray(rel, dtype=np.float64)[layers],
        measured=np.array([max(row[np.isfinite(row)], default=math.nan) for row in total]),
        allreduce=allreduce_library(str(run.attrs.get("mpi_library", ""))),
    )


def _traced_layers(cpu: np.ndarray, source: str) -> list[int]:
    """The layers every rank traced: each rank's activations a prefix of K (``--stop``
    eps / local end layers early), at least one."""
    finite = np.isfinite(cpu)
    counts = finite.sum(axis=2)
    prefix = (finite == (np.arange(cpu.shape[2]) < counts[..., None])).all(axis=(1, 2))
    full = prefix & (counts >= 1).all(axis=1)
    some = finite.any(axis=(1, 2))
    layers = [int(i) for i in np.flatnonzero(full)]
    if not layers:
        raise UserError(f"{source}: its trace records no complete layer; rerun it")
    if (some & ~full).any() or layers != list(range(layers[0], layers[-1] + 1)):
        raise UserError(f"{source}: its trace has incomplete layers; the file is damaged")
    return layers


def _metric_bytes(run: RunLog, layers: list[int]) -> np.ndarray:
    """Per traced layer, the metric exchanges' bytes to a neighbour (logs without the
    field: 0)."""
    column = run.layers.get("metric_bytes")
    if column is None:
        return np.zeros(len(layers), dtype=np.int64)
    values = np.asarray(column, dtype=np.float64)[layers]
    return np.nan_to_num(values, nan=0.0).max(axis=1).astype(np.int64)


def _max_lead(tattrs: dict[str, Any], config: dict[str, Any]) -> int | None:
    lead = tattrs.get("max_lead", config.get("max_lead", 4))
    return None if lead is None or int(lead) < 0 else int(lead)


def _mix_rounds(alg, tattrs: dict[str, Any], config: dict[str, Any], source: str) -> int:
    if not alg.mixes:
        return 0
    rounds = tattrs.get("mix_rounds", -1)
    if rounds is None or int(rounds) < 1:
        rounds = config.get("mix_rounds") or -1
    if int(rounds) < 1:
        raise UserError(f"{source}: a {alg.name} trace without mix_rounds; the file is damaged")
    return int(rounds)


# --------------------------------------------------------------------------- the timeline


def _auto_penalty(alg: Any, config: dict) -> bool:
    """Whether the run's layers start with the auto penalty's exchange (the drivers' one
    decision, :meth:`~dssfn_mpi.drivers.Driver.penalty_source`, from the run's settings)."""
    value = config.get(alg.penalty_option or "rho", "auto")
    fixed = None if isinstance(value, str) else value
    return alg.driver.penalty_source(fixed, False) is Penalty.AUTO


def _model(tr: Trace, net: Network) -> TimingModel:
    return TimingModel(mode=tr.mode, neighbors=tr.neighbors, hops=tr.hops, network=net,
                       mix_rounds=tr.mix_rounds, auto_penalty=tr.auto_penalty,
                       allreduce=tr.allreduce)


def _time_to_eps(end: np.ndarray, activation: np.ndarray | None, rel: np.ndarray | None,
                 eps: float, origin: float) -> float | None:
    """Seconds from ``origin`` until every rank's latest snapshot is within ``eps``."""
    if activation is None or rel is None or activation.size == 0:
        return None
    times = end[:, np.clip(activation, 1, end.shape[1]) - 1]  # (M, S): snapshot taken
    times = np.where(np.isnan(rel), np.inf, times)  # not taken (the rank had stopped)
    good = rel <= eps  # NaN (no check) is never good
    moments = np.unique(times)
    latest = (times[:, None, :] <= moments[None, :, None]).sum(axis=2) - 1  # (M, T)
    ok = np.take_along_axis(good, np.maximum(latest, 0), axis=1) & (latest >= 0)
    hit = np.flatnonzero(ok.all(axis=0))
    return float(moments[hit[0]] - origin) if hit.size else None


def timeline(run: RunLog, network: Network, slow: dict[int, float] | None = None,
             jitter: tuple[str, float] | None = None,
             seed: int = 0) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Projected start and end of every activation (iteration) of every traced layer.

    Parameters
    ----------
    run, network, slow, jitter, seed
        As for :func:`project`.

    Returns
    -------
    list of (int, numpy.ndarray, numpy.ndarray)
        Per traced layer: its index, then ``start`` and ``end``, each
        ``(M, K)`` seconds from the start of the first traced layer.

    Raises
    ------
    UserError
        As for :func:`project`.
    """
    tr = read_trace(run)
    if jitter is not None:
        tr.cpu = tr.cpu * jitter_factors(jitter, tr.cpu.shape, seed)
    for rank, factor in (slow or {}).items():
        if not 0 <= rank < run.nodes:
            raise UserError(f"--slow {rank}:{factor:g}: the run has ranks 0..{run.nodes - 1}")
        tr.cpu[:, rank] *= factor
    # A run made with --slow slept (factor - 1) x each activation: no CPU time, so the
    # trace does not show it; the engines' throttle is part of the run's rules.
    for rank, factor in (run.config.get("slow") or {}).items():
        if 0 <= int(rank) < run.nodes:
            tr.cpu[:, int(rank)] *= float(factor)
    model = _model(tr, network)
    t0, ends, out = np.zeros(run.nodes), [], []
    for i, layer in enumerate(tr.layers):
        begin = model.layer_begin(t0, tr.phase_cpu[i], ends[i - 2] if i >= 2 else None,
                                  int(tr.metric_bytes[i]))
        alg = model.algorithm
        start, end = alg.driver.replay(alg, tr, i, model, begin, np.nan_to_num(tr.cpu[i]))
        # A rank that ended the layer early (--stop) stays at its last end from there on.
        last = np.minimum(tr.counts[i], tr.cpu.shape[2]) - 1
        after = np.arange(end.shape[1])[None, :] > last[:, None]
        rows = np.arange(end.shape[0])
        end = np.where(after, end[rows, last][:, None], end)
        start = np.where(after, end, start)
        t0 = end[:, -1]
        ends.append(t0)
        out.append((layer, start, end))
    return out


def project(run: RunLog, network: Network, slow: dict[int, float] | None = None,
            jitter: tuple[str, float] | None = None, seed: int = 0,
            eps: float = 1e-2) -> Projection:
    """The dedicated-core timeline of a traced run under ``network``, summarised.

    Parameters
    ----------
    run
        A run log with a trace (async, sync or sync-graph); only attribute
        access is used (``attrs``, ``layers``, ``ranks``, ``config``,
        ``trace``, ``trace_attrs``, ``trajectory``, ``nodes``, ``source``).
    network
        Latency and bandwidth (:func:`parse_network`).
    slow
        ``{rank: factor}``: that rank's activations (iterations) take
        ``factor`` times their traced CPU time, as under ``train --slow``
        (whose own factors, from the run's configuration, apply too).
    jitter
        :func:`parse_jitter`'s result: each activation's compute times a
        seeded random factor (:func:`jitter_factors`).
    seed
        Seed of the jitter.
    eps
        Target relative distance to O* for ``time_to_eps``.

    Returns
    -------
    Projection
        Per layer: projected seconds (the slowest rank's end minus the
        previous layer's slowest end, so the layers add up to the total),
        measured seconds (max over ranks of ``/layers/total_seconds``), the
        solve alone (first activation's start on any rank to the last one's
        end), time to eps from that start; the totals are over the traced layers.

    Raises
    ------
    UserError
        No trace, central mode, a damaged trace, or a ``slow`` rank outside
        the run.
    """
    tr = read_trace(run)
    done, out = 0.0, []
    for i, (layer, start, end) in enumerate(timeline(run, network, slow, jitter, seed)):
        origin, last = float(start[:, 0].min()), float(end[:, -1].max())
        rel = None if tr.rel_distance is None else tr.rel_distance[i]
        out.append(LayerProjection(
            layer=layer,
            seconds=last - done,
            measured_seconds=float(tr.measured[i]),
            solve_seconds=last - origin,
            time_to_eps=_time_to_eps(end, tr.activation, rel, eps, origin),
        ))
        done = last
    measured = [lp.measured_seconds for lp in out if math.isfinite(lp.measured_seconds)]
    return Projection(network, done, math.fsum(measured) if measured else math.nan, out)


# --------------------------------------------------------------------------- files and text


def load_run(path: PathLike, run_name: str | None = None) -> RunLog:
    """The run to replay: a run log, or run ``run_name`` of a sweep file.

    Parameters
    ----------
    path
        A run log or sweep file.
    run_name
        Which run of a sweep file (``--run``); must be None for a run log.

    Returns
    -------
    RunLog

    Raises
    ------
    UserError
        Unreadable file, ``--run`` missing or unknown for a sweep (the message
        lists the runs), or given for a single run log.
    """
    if not is_sweep(path):
        if run_name is not None:
            raise UserError(f"{path} is a single run log; --run is for sweep files")
        return read_runlog(path)
    runs = read_sweep(path)
    if run_name in runs:
        return runs[str(run_name)]
    names = ", ".join(runs) or "none"
    what = "pick one with --run NAME" if run_name is None else f"it has no run {run_name!r}"
    raise UserError(f"{path} is a sweep file; {what} (runs: {names})")


def _describe(network: Network) -> str:
    return (f"network {network.name} (alpha {network.alpha * 1e6:.3g} us, "
            f"beta {network.beta / 1e9:.3g} GB/s)")


_COLUMNS = (("layer", 5), ("measured[s]", 11), ("projected[s]", 12), ("solve[s]", 9),
            ("to eps[s]", 9))


def format_projection(proj: Projection, run: RunLog, eps: float = 1e-2,
                      options: str = "") -> str:
    """The readable table of ``dssfn-mpi replay`` (and ``report --replay``).

    Parameters
    ----------
    proj
        From :func:`project`.
    run
        The run it projects (for the header).
    eps
        The target the ``to eps`` column used.
    options
        Extra text for the header, e.g. ``"slow 3:5, jitter exp:0.5 (seed 0)"``.

    Returns
    -------
    str
        Lines without a trailing newline; unmeasured or unreached values read ``-``.
    """
    a = run.attrs
    lines = [
        f"projected dedicated-core time of {run.source or 'the run'}: mode {a.get('mode')}, "
        f"M {a.get('nodes')}, K {a.get('iters')}; {_describe(proj.network)}"
        + (f"; {options}" if options else ""),
        "measured: wall time of the run (CPU sharing if ranks > cores); projected: one core "
        f"per rank, compute = traced thread CPU time; to eps: rel. distance <= {eps:g}",
        "  ".join(name.rjust(width) for name, width in _COLUMNS),
    ]
    for lp in proj.layers:
        cells = (str(lp.layer), number(lp.measured_seconds, ".4f"), number(lp.seconds, ".4f"),
                 number(lp.solve_seconds, ".4f"), number(lp.time_to_eps, ".4f"))
        lines.append("  ".join(c.rjust(width) for c, (_n, width) in zip(cells, _COLUMNS)))
    ratio = proj.measured_seconds / proj.total_seconds if proj.total_seconds > 0 else math.nan
    lines.append(f"total: measured {number(proj.measured_seconds, '.4f')} s, projected "
                 f"{number(proj.total_seconds, '.4f')} s (measured / projected "
                 f"{number(ratio, '.2f')})")
    return "\n".join(lines)


def report_projection(path: PathLike, network: Network) -> str:
    """``report --replay``: the projection of a run log, or of each run of a sweep.

    Parameters
    ----------
    path
        A run log or sweep file.
    network
        The network to project on.

    Returns
    -------
    str
        The table(s); in a sweep, a run that cannot be replayed gets one line
        saying why.

    Raises
    ------
    UserError
        A single run log that cannot be replayed (no trace, central mode).
    """
    if not is_sweep(path):
        run = read_runlog(path)
        return format_projection(project(run, network), run)
    blocks = []
    for name, run in read_sweep(path).items():
        try:
            text = format_projection(project(run, network), run)
        except UserError as exc:
            text = f"no projection: {exc}"
        blocks.append(f"== projection of run {name} ==\n{text}")
    return "\n\n".join(blocks)
