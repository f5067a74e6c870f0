"""How long a simulated node computes: the speed models of ``dssfn-mpi simulate``.

The base cost of activation (iteration) k of node m in layer l is one of

``measured`` (default)
    the thread CPU time the simulator itself spent on that node's
    activation (each node runs alone on the core while it is measured);
``const:SECONDS``
    every activation costs SECONDS; the layer-start phases cost nothing;
``trace:RUN.h5``
    ``/trace/cpu[l, m, k]`` and ``/trace/phase_cpu`` of a traced run with the
    same M (and at least as many layers and activations), times that run's
    own ``--slow`` factors, as ``dssfn-mpi replay`` costs them.

It is then multiplied by the node's factors: ``--slow RANK:FACTOR`` (a
straggler, as in train), ``--speeds FRACTION:FACTOR,...`` (heterogeneous
classes: the first ``round(FRACTION M)`` nodes run FACTOR times slower, the next
class follows, and so on; fractions sum to 1) and ``--jitter`` (replay's
seeded per-activation factors, :func:`dssfn_mpi.analysis.replay.jitter_factors`).
Layer-start phases get the class factors only: ``--slow`` slows a node's activations, as
in train (whose straggler sleeps after each activation) and replay, and the jitter is
per activation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..analysis.replay import draw_jitter, parse_jitter
from ..errors import UserError, require

__all__ = ["JitterStream", "SpeedModel", "TraceCosts", "parse_classes", "parse_speed"]

#: Factors a :class:`JitterStream` holds per node: a window on the node's activations.
JITTER_BLOCK = 1024

#: Factors drawn (and dropped) at a time when a :class:`JitterStream` skips ahead.
_SKIP_CHUNK = 1 << 16


def _no_clock() -> float:
    return 0.0


_SPEED_USAGE = "choose measured, const:SECONDS (e.g. const:1e-3) or trace:RUN.h5"


def parse_speed(text: str) -> tuple[str, float | str | None]:
    """``measured``, ``const:SECONDS`` or ``trace:RUN.h5`` -> ``(kind, parameter)``.

    Raises
    ------
    UserError
        Anything else, or a constant that is not a positive number.
    """
    kind, sep, value = str(text).partition(":")
    if kind == "measured" and not sep:
        return "measured", None
    if kind == "const" and sep:
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        require(math.isfinite(seconds) and seconds > 0,
                f"--speed {text!r}: SECONDS must be a positive number, e.g. const:1e-3")
        return "const", seconds
    if kind == "trace" and sep and value:
        return "trace", value
    raise UserError(f"--speed {text!r}: {_SPEED_USAGE}")


def parse_classes(text: str | None, nodes: int) -> np.ndarray:
    """``--speeds FRACTION:FACTOR,...`` -> each node's slow-down factor, shape (M,).

    Classes take consecutive nodes: the first ``round(FRACTION_1 M)`` nodes get
    FACTOR_1, the next ``round((F_1 + F_2) M) - round(F_1 M)`` FACTOR_2, and so on.

    Raises
    ------
    UserError
        Malformed items, a fraction outside (0, 1], a factor <= 0, or fractions
        that do not sum to 1.
    """
    factors = np.ones(nodes)
    if text is None:
        return factors
    usage = f"--speeds {text!r}: expected FRACTION:FACTOR,... e.g. 0.5:2,0.5:1"
    pairs = []
    for item in str(text).split(","):
        frac_s, sep, factor_s = item.partition(":")
        try:
            frac, factor = float(frac_s), float(factor_s)
        except ValueError:
            raise UserError(usage) from None
        require(sep == ":" and 0 < frac <= 1 and math.isfinite(factor) and factor > 0,
                f"{usage} (fractions in (0, 1], factors > 0)")
        pairs.append((frac, factor))
    total = math.fsum(f for f, _ in pairs)
    require(abs(total - 1.0) < 1e-9, f"--speeds {text!r}: the fractions sum to {total:g}, not 1")
    cum, lo = 0.0, 0
    for frac, factor in pairs:
        cum += frac
        hi = int(round(cum * nodes))
        factors[lo:hi] = factor
        lo = hi
    return factors


@dataclass
class TraceCosts:
    """A traced run's compute costs (the ``trace:`` speed model)."""

    cpu: np.ndarray  # (L, M, K) seconds, the run's own --slow factors applied
    phase_cpu: np.ndarray  # (L, M, 3): features, penalty, factor
    source: str

    @classmethod
    def load(cls, path: str) -> TraceCosts:
        """Read and check a run log's trace (one line for a missing or untraced file)."""
        from pathlib import Path

        from ..analysis.replay import read_trace
        from ..runlog import read_runlog

        require(Path(path).is_file(), f"--speed trace:{path}: no such run log")
        run = read_runlog(path)
        tr = read_trace(run)
        require(tr.layers[0] == 0, f"--speed trace:{path}: its trace starts at layer "
                f"{tr.layers[0]} (a resumed run); use a run traced from layer 0")
        cpu = tr.cpu.copy()
        for rank, factor in (run.config.get("slow") or {}).items():
            if 0 <= int(rank) < cpu.shape[1]:
                cpu[:, int(rank)] *= float(factor)
        return cls(cpu=cpu, phase_cpu=tr.phase_cpu, source=str(path))


def _skip(rng: np.random.Generator, jitter: tuple[str, float], count: int) -> None:
    """Draw and drop the next ``count`` jitter factors of ``rng``."""
    while count > 0:
        draw_jitter(rng, jitter, min(count, _SKIP_CHUNK))
        count -= _SKIP_CHUNK


class JitterStream:
    """The factors ``jitter_factors(jitter, (layers, M, K), seed)`` of
    :func:`dssfn_mpi.analysis.replay.jitter_factors`, drawn as they are asked for.

    That array is drawn in the order (layer, node, activation). The stream walks the order
    once for each layer asked for, keeping only the random generator's state where each
    node's factors start, then draws a node's factors again ``block`` activations at a time
    around the one asked for: the same values, with ``M x block`` factors in memory instead
    of ``layers x M x K``.

    Parameters
    ----------
    jitter : tuple of (str, float)
        From :func:`dssfn_mpi.analysis.replay.parse_jitter`.
    shape : tuple of int
        ``(layers, M, K)``.
    seed : int
        Seed of the generator, as for ``jitter_factors``.
    block : int
        Factors held per node.
    """

    def __init__(self, jitter: tuple[str, float], shape: tuple[int, int, int], seed: int,
                 block: int = JITTER_BLOCK) -> None:
        self.jitter = jitter
        self.shape = tuple(int(n) for n in shape)
        self.block = max(int(block), 1)
        self._rng = np.random.default_rng(seed)  # at the first factor of the next layer walked
        self._starts: list[list[dict]] = []  # per walked layer: each node's generator state
        nodes = self.shape[1]
        self._layer = -1
        self._gens: list[np.random.Generator | None] = [None] * nodes
        self._drawn = np.zeros(nodes, dtype=np.int64)  # the layer's factors each has drawn
        self._window = np.zeros(nodes, dtype=np.int64)  # first activation of each node's row
        self._buffer = np.empty((nodes, self.block))
        self._rows = np.arange(nodes)

    def _enter(self, layer: int, k: int) -> None:
        """Make ``layer`` the current one (walking the layers before it once)."""
        L, M, K = self.shape
        if not (0 <= layer < L and 0 <= k < K):
            raise IndexError(f"jitter of layer {layer}, activation {k} is outside {L} x {K}")
        while len(self._starts) <= layer:
            states = []
            for _ in range(M):
                states.append(self._rng.bit_generator.state)
                _skip(self._rng, self.jitter, K)
            self._starts.append(states)
        if layer != self._layer:
            self._layer = layer
            self._gens = [None] * M
            self._window[:] = -2 * self.block  # no row holds anything yet

    def _fill(self, node: int, k: int) -> None:
        """Draw node's row: the ``block`` factors of its window around activation ``k``."""
        lo = k - k % self.block
        gen = self._gens[node]
        if gen is None or self._drawn[node] > lo:
            bits = type(self._rng.bit_generator)()
            bits.state = self._starts[self._layer][node]
            gen = self._gens[node] = np.random.Generator(bits)
            self._drawn[node] = 0
        _skip(gen, self.jitter, lo - int(self._drawn[node]))
        count = min(self.block, self.shape[2] - lo)
        self._buffer[node, :count] = draw_jitter(gen, self.jitter, count)
        self._drawn[node] = lo + count
        self._window[node] = lo

    def factor(self, layer: int, node: int, k: int) -> float:
        """The factor of activation ``k`` of ``node`` in ``layer``."""
        self._enter(layer, k)
        if not 0 <= node < self.shape[1]:
            raise IndexError(f"jitter of node {node}: there are {self.shape[1]} nodes")
        if not 0 <= k - self._window[node] < self.block:
            self._fill(node, k)
        return float(self._buffer[node, k - self._window[node]])

    def factors(self, layer: int, k: int) -> np.ndarray:
        """The factors of activation ``k`` of every node in ``layer``, shape (M,)."""
        self._enter(layer, k)
        offset = k - self._window
        for node in np.flatnonzero((offset < 0) | (offset >= self.block)):
            self._fill(int(node), k)
        return self._buffer[self._rows, k - self._window]


@dataclass
class SpeedModel:
    """Seconds of every simulated compute, from a base model and the nodes' factors.

    Parameters
    ----------
    kind : str
        ``measured``, ``const`` or ``trace`` (:func:`parse_speed`).
    node_factor : ndarray, shape (M,)
        Straggler and class factors of each node (multiplied): its activations'.
    phase_factor : ndarray, shape (M,), optional
        Class factors of each node: its layer-start phases' (default: ``node_factor``).
    jitter : JitterStream or None
        The per-activation factors of ``(layers, M, K)`` activations, or None.
    const : float
        The ``const`` model's seconds per activation.
    trace : TraceCosts or None
        The ``trace`` model's costs.
    """

    kind: str
    node_factor: np.ndarray
    phase_factor: np.ndarray | None = None
    jitter: JitterStream | None = None
    const: float = 0.0
    trace: TraceCosts | None = None
    description: str = field(default="")

    @classmethod
    def build(cls, speed: str, nodes: int, layers: int, iters: int,
              slow: dict[int, float], classes: str | None, jitter: str | None,
              seed: int) -> SpeedModel:
        """The model of the command line's ``--speed``, ``--slow``, ``--speeds``, ``--jitter``.

        Raises
        ------
        UserError
            A bad spec, a straggler outside the nodes, or a trace that does not
            cover ``nodes`` x ``layers`` x ``iters``.
        """
        kind, param = parse_speed(speed)
        factor = parse_classes(classes, nodes)
        phase_factor = factor.copy()
        for rank, f in slow.items():
            require(0 <= rank < nodes, f"--slow {rank}:{f:g}: there are only {nodes} nodes "
                    f"(0..{nodes - 1})")
            factor[rank] *= f
        jit = None
        if jitter is not None:
            jit = JitterStream(parse_jitter(jitter), (layers, nodes, iters), seed)
        costs = None
        if kind == "trace":
            costs = TraceCosts.load(str(param))
            L, M, K = costs.cpu.shape
            require(M == nodes, f"--speed trace:{param}: the run had {M} ranks, not "
                    f"--nodes {nodes}")
            require(L >= layers and K >= iters,
                    f"--speed trace:{param}: its trace covers {L} layers of {K} activations; "
                    f"this simulation needs {layers} of {iters}")
        parts = [speed] + ([f"speeds {classes}"] if classes else [])
        parts += [f"slow {r}:{f:g}" for r, f in sorted(slow.items())]
        if jitter is not None:
            parts.append(f"jitter {jitter} (seed {seed})")
        return cls(kind=kind, node_factor=factor, phase_factor=phase_factor, jitter=jit,
                   const=float(param) if kind == "const" else 0.0, trace=costs,
                   description=", ".join(parts))

    def cpu_clock(self) -> Callable[[], float]:
        """The clock of the measurements this model reads: the thread CPU time under
        ``measured``, else a clock that reads 0 (its calls cost a system call each)."""
        return time.thread_time if self.kind == "measured" else _no_clock

    def activation(self, layer: int, node: int, k: int, measured: float) -> float:
        """Seconds of activation (iteration) ``k`` of ``node`` in ``layer``."""
        if self.kind == "measured":
            base = measured
        elif self.kind == "const":
            base = self.const
        else:
            base = float(self.trace.cpu[layer, node, k])
        if self.jitter is not None:
            base *= self.jitter.factor(layer, node, k)
        return base * float(self.node_factor[node])

    def activations(self, layer: int, k: int, measured: np.ndarray) -> np.ndarray:
        """:meth:`activation` of every node at once, shape (M,)."""
        if self.kind == "measured":
            base = np.asarray(measured, dtype=float)
        elif self.kind == "const":
            base = np.full(self.node_factor.size, self.const)
        else:
            base = self.trace.cpu[layer, :, k].astype(float)
        if self.jitter is not None:
            base = base * self.jitter.factors(layer, k)
        return base * self.node_factor

    def phases(self, layer: int, measured: np.ndarray) -> np.ndarray:
        """Seconds of the layer-start phases (features, penalty, factor), shape (M, 3)."""
        if self.kind == "measured":
            base = np.asarray(measured, dtype=float)
        elif self.kind == "const":
            base = np.zeros((self.node_factor.size, 3))
        else:
            base = self.trace.phase_cpu[layer]
        factor = self.node_factor if self.phase_factor is None else self.phase_factor
        return base * factor[:, None]
