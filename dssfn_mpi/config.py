"""Training configuration: defaults, config files, presets and validation.

Everything a user can get wrong is checked here, before any MPI work, with
the same outcome on every rank (the checks read only the configuration and
the world size).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable

from .algorithms.registry import ALGORITHMS, UPDATES, known, lookup, names
from .algorithms.stoprule import StopRule, parse_stop
from .errors import UserError, require
from .mailbox.waiting import POLICIES
from .options import add_arguments, from_args, from_mapping, option, wrong_type
from .ssfn.model import default_eps, default_width

__all__ = [
    "MODES",
    "RMA_PATHS",
    "PAPER_TABLE3",
    "UPDATES",
    "METRICS",
    "TrainConfig",
    "add_train_arguments",
    "apply_preset",
    "config_from_args",
    "config_from_mapping",
    "load_config_file",
    "parse_fail_at",
    "parse_per_layer",
    "parse_slow",
]

#: The methods ``--mode`` names (:mod:`dssfn_mpi.algorithms.registry`); the first is the default.
MODES = names()
RMA_PATHS = ("auto", "put", "store")
METRICS = ("gram", "identity")

# Table 3 of Liang et al. (ICASSP 2020): (mu_0, mu_l) of the central and sync
# dSSFN ADMM, (gamma_0, gamma_l) of async dSSFN. eta = 0.5 in the paper.
PAPER_TABLE3: dict[str, dict[str, tuple[float, float]]] = {
    "vowel": {"central_mu": (1e-5, 1e1), "sync_mu": (1e-4, 1e0), "gamma": (10**1.5, 1e-1)},
    "satimage": {"central_mu": (1e6, 1e5), "sync_mu": (1e-4, 1e-1), "gamma": (1e0, 1e-1)},
    "caltech101": {"central_mu": (1e0, 1e-2), "sync_mu": (1e-1, 1e0), "gamma": (1e0, 1e-1)},
    "letter": {"central_mu": (1e2, 1e4), "sync_mu": (1e-6, 1e0), "gamma": (1e4, 1e-2)},
    "norb": {"central_mu": (1e-8, 1e2), "sync_mu": (1e-1, 1e-1), "gamma": (1e2, 1e-2)},
    "mnist": {"central_mu": (1e2, 1e5), "sync_mu": (1e-5, 1e0), "gamma": (1e-1, 1e-1)},
}


def _mode_help() -> str:
    """``--mode``'s help: every registered mode (a plug-in's too), the default first."""
    modes = names()
    return f"{modes[0]} (default), {', '.join(modes[1:])}"


def _relaxation_help(attr: str, what: str) -> Callable[[], str]:
    """The help of ``--eta`` / ``--relax``, naming every registered mode's default."""
    return lambda: f"{what} (default: the mode's: {_relaxation_defaults(attr)})"


def _relaxation_defaults(attr: str) -> str:
    """The modes' default relaxations (``relax`` or ``step_size`` of their algorithms), for
    ``--help``: ``"sync 1.8, sync-graph 1.8"``, over the modes that take the option."""
    algs = [lookup(mode) for mode in names()]
    return ", ".join(f"{a.name} {getattr(a, attr):g}" for a in algs
                     if (a.relaxes if attr == "relax" else a.per_neighbour))


def parse_per_layer(text: str | float | list | tuple, name: str) -> tuple[float, ...] | str:
    """Parse ``"auto"``, ``"1.0"`` or ``"10,0.1,0.05"`` into a per-layer tuple.

    Value i applies to layer i; the last value repeats for deeper layers, so
    ``"g0,gl"`` is the paper's (layer 0, layers >= 1) pair. ``"auto"`` is kept
    as is: the penalty is then set per layer from the data (see
    :func:`dssfn_mpi.ssfn.solver.auto_penalty`).
    """
    if isinstance(text, str) and text.strip().lower() == "auto":
        return "auto"
    if isinstance(text, (int, float)):
        items: list[Any] = [text]
    elif isinstance(text, (list, tuple)):
        items = list(text)
    else:
        items = [s for s in str(text).replace(" ", "").split(",") if s]
    try:
        values = tuple(float(v) for v in items)
    except (TypeError, ValueError):
        raise UserError(
            f"--{name} {text!r} is not a number or a comma-separated list of numbers"
        ) from None
    require(len(values) > 0, f"--{name} needs at least one value")
    for v in values:
        require(
            math.isfinite(v) and v > 0, f"--{name} values must be positive and finite, got {v}"
        )
    return values


def parse_fail_at(text: str | None) -> tuple[int, int, str] | None:
    """Parse ``RANK:LAYER`` or ``RANK:LAYER:kill`` (fault injection for tests)."""
    if text is None:
        return None
    parts = str(text).split(":")
    try:
        rank, layer = int(parts[0]), int(parts[1])
        how = parts[2] if len(parts) > 2 else "raise"
    except (ValueError, IndexError):
        raise UserError(f"--fail-at {text!r}: expected RANK:LAYER or RANK:LAYER:kill") from None
    require(how in ("raise", "kill") and len(parts) <= 3,
            f"--fail-at {text!r}: the third part may only be 'kill'")
    require(rank >= 0 and layer >= 0, f"--fail-at {text!r}: RANK and LAYER must be >= 0")
    return rank, layer, how


def parse_slow(items: list[str] | None) -> dict[int, float]:
    """Parse repeated ``RANK:FACTOR`` straggler specs into ``{rank: factor}``."""
    out: dict[int, float] = {}
    for item in items or []:
        rank_s, sep, factor_s = str(item).partition(":")
        try:
            rank, factor = int(rank_s), float(factor_s)
        except ValueError:
            raise UserError(f"--slow {item!r}: expected RANK:FACTOR, e.g. --slow 3:5") from None
        require(sep == ":", f"--slow {item!r}: expected RANK:FACTOR, e.g. --slow 3:5")
        require(
            math.isfinite(factor) and factor >= 1.0,
            f"--slow {item!r}: FACTOR must be >= 1 (times slower)",
        )
        require(rank >= 0, f"--slow {item!r}: RANK must be >= 0")
        out[rank] = factor
    return out


def _per_layer(name: str, allow_auto: bool = True):
    """Parser of a per-layer list setting (``--gamma``, ``--rho``, ``--mu``)."""

    def parse(value: Any, source: str | None) -> tuple[float, ...] | str:
        parsed = parse_per_layer(value, name)
        if isinstance(parsed, str) and not allow_auto:
            if source is None:
                raise UserError(f"--{name} cannot be auto")
            raise wrong_type(source, name, value, f"{name} cannot be auto")
        return parsed

    return parse


def _slow(value: Any, source: str | None) -> dict[int, float]:
    """``--slow`` (repeated) or a config file's ``{rank: factor}`` / ``["3:5"]``."""
    if isinstance(value, dict):
        return parse_slow([f"{k}:{v}" for k, v in value.items()])
    if not isinstance(value, list):
        raise wrong_type(source or "--slow", "slow", value, 'expected a list like ["3:5"]')
    return parse_slow([str(v) for v in value])


def _fail_at(value: Any, source: str | None) -> tuple[int, int, str] | None:
    """``RANK:LAYER[:kill]``, or its parts as a list (a saved configuration)."""
    if isinstance(value, (list, tuple)):
        value = ":".join(str(v) for v in value)
    return parse_fail_at(value)


def _max_lead(value: int, source: str | None) -> int | None:
    """``-1`` means fully asynchronous: no bound on the delay (None)."""
    require(value >= -1, f"--max-lead must be >= 0, or -1 for no bound, got {value}")
    return None if value < 0 else value


def _stop(value: Any, source: str | None) -> str:
    """``iters``, ``eps:E`` or ``local:TOL``, kept in its canonical spelling."""
    from .algorithms.stoprule import parse_stop

    if not isinstance(value, str):
        raise wrong_type(source or "--stop", "stop", value, 'expected a string like "eps:1e-2"')
    return str(parse_stop(value))


def _table(value: Any, source: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise wrong_type(source or "dataset_options", "dataset_options", value,
                         "expected a table")
    return dict(value)


@dataclass
class TrainConfig:
    """All settings of one training run (defaults are the recommended ones).

    Each field is the one declaration of a setting: type, default, help and
    parser. The ``train`` command's flags and the config-file checks are
    derived from it (:mod:`dssfn_mpi.options`), so a new setting is one field
    here (plus its use, and its check in :meth:`validate` if it has limits).
    """

    dataset: str = option("data", "digits (default, bundled), synthetic, vowel, satimage, "
                          "letter, mnist, norb, caltech101", "digits")
    data_dir: str | None = option("data", "folder with the public dataset files (default: "
                                  "$DSSFN_DATA_DIR, else ~/.local/share/dssfn-mpi; "
                                  "data/README.md)")
    partition: str = option("data", "uniform (default), stratified, dirichlet:ALPHA", "uniform")
    mode: str = option("method", _mode_help, MODES[0])
    update: str = option("method", "async update form: edge (exact, default) or paper (eq. 7)",
                         "edge")
    metric: str = option(
        "method", "the penalty's metric on the input layer (layer 0): gram (default: the "
        "nodes' Gram matrices, agreed per edge with each neighbour, averaged by sync) or "
        "identity (the paper's scalar penalty on every layer); --update paper is scalar",
        "gram")
    topology: str = option("method", "circular (default), ring, complete, random-regular, "
                           "exponential (i linked to i +- 2^k), file", "circular")
    degree: int | None = option("method", "node degree d of circular/random-regular graphs "
                                "(1..M-1; default 2, 1 when M = 2); ring, complete and "
                                "exponential fix their own")
    edges: str | None = option("method", "edge-list file for --topology file")
    layers: int = option("method", "hidden layers L; layers 0..L are solved ({default})", 10)
    hidden: int | None = option("method", "hidden width n (default 2Q + 1000)")
    iters: int = option("method", "K: ADMM activations per node per layer ({default}); the cap "
                        "under --stop eps/local", 200)
    stop: str = option(
        "method", "when a layer ends: iters (K activations, default), eps:E (every node "
        "within E of the exact solution; benchmarks) or local:TOL (every node's local "
        "residuals <= TOL; no exact solution needed)", "iters", parse=_stop, metavar="RULE")
    gamma: tuple[float, ...] | str = option(
        "method", "async ADMM gamma, one value or a per-layer list 'g0,g1,...' (last repeats); "
        "default auto (per layer, from the nodes' own constrained solutions)", "auto",
        parse=_per_layer("gamma"))
    eta: float | None = option(
        "method", _relaxation_help("step_size", "step size (relaxation) in (0, 2) of "
                                   "the per-neighbour modes"))
    relax: float | None = option(
        "method", _relaxation_help("relax", "over-relaxation alpha in (0, 2) of "
                                   "consensus ADMM, 1 plain ADMM"), metavar="ALPHA")
    rho: tuple[float, ...] | str = option(
        "method", "sync consensus penalty, one value or per-layer list (default auto, as "
        "--gamma)", "auto", parse=_per_layer("rho"))
    norm_bound: float | None = option(
        "method", "eps of the layer problem: the bound on the squared Frobenius norm of each "
        "output matrix O, ||O||_F^2 <= eps (> 0; default 2Q)", renamed_from="eps",
        metavar="BOUND")
    central_solver: str = option(
        "method", "central mode: exact (default, the ground truth) or admm (the SSFN authors' "
        "early-stopped ADMM, 100 iterations)", "exact")
    mu: tuple[float, ...] = option(
        "method", "central admm: mu, one value or per-layer list (default {default[0]:g})",
        (1e3, 1e3), parse=_per_layer("mu", allow_auto=False))
    mix_rounds: int | None = option(
        "method", "sync-graph mixing rounds per iteration (default: enough to shrink "
        "disagreement 1e4-fold); oneshot-graph mixing rounds per layer (default: from "
        "--mix-tol)")
    mix_tol: float = option(
        "method", "oneshot-graph: relative accuracy of every node's averaged statistics "
        "(default {default:g}): the rounds r with M rho_W^r <= TOL", 1e-10)
    max_lead: int | None = option(
        "method", "async, hood: activations a rank may run ahead of its slowest neighbour "
        "(bounded delay; default {default}; -1 = unbounded)", 4, parse=_max_lead)
    rma: str = option(
        "method", "async, hood: how a rank writes Z into its neighbours' windows: store "
        "(plain stores into a shared-memory window; only when every rank is on one node and the "
        "one-sided component makes shared windows), put (MPI_Put into an allocated window, "
        "anywhere) or auto (default: store where possible, else put); the run log records "
        "the path taken", "auto")
    wait: str = option(
        "method", "how a rank waits for others, the same in every engine: spin (poll like "
        "blocking MPI), hybrid (spin 30 us, then sleep) or auto (default: from the ranks per "
        "core and how fast partners answer)", "auto")
    seed: int = option("method", "seed of the split, shards, graph and random weights (>= 0)", 0)
    slow: dict[int, float] = option(
        "method", "make RANK's activations FACTOR times slower (repeatable)",
        default_factory=dict, parse=_slow, metavar="RANK:FACTOR", repeatable=True)
    preset: str | None = option("method",
                                "'paper': the paper's Table 3 settings for the dataset")
    out: str | None = option("output", "HDF5 run log to write (atomically)")
    log_every: int = option(
        "output", "rewrite --out after every N layers, so a run that dies leaves a valid log "
        "({default}; 0 = only at the end)", 1, metavar="N")
    overwrite: bool = option("output", "replace an existing --out file", False)
    check: bool = option("output", "skip the per-layer centralized-equivalence measurement",
                         True)
    evaluate: bool = option("output", "skip per-layer train/test accuracy", True,
                            flag="--no-eval")
    snapshot_every: int = option(
        "output", "keep each rank's O every S activations for the run log's trajectories "
        "(default 0: K // 20, at least 1)", 0, metavar="S")
    trace_limit_mb: float = option(
        "output", "record per-activation traces unless they would exceed MB megabytes "
        "({default:g}; 0 = no trace)", 256.0, flag="--trace-limit", metavar="MB")
    timeout: float = option(
        "output", "seconds a rank waits for silent partners before aborting ({default:g})",
        600.0)
    save_model: str | None = option(
        "output", "write every node's trained weights to this HDF5 file")
    fail_at: tuple[int, int, str] | None = option(
        "output", "fault injection for tests: RANK raises (or is killed) in LAYER",
        parse=_fail_at, metavar="RANK:LAYER[:kill]", hidden=True)
    # Config files only: keyword arguments of the dataset loader.
    dataset_options: dict[str, Any] = option("data", None, default_factory=dict, parse=_table)

    @property
    def stop_rule(self) -> StopRule:
        """``stop`` as a rule: the one place the ``--stop`` string is read."""
        return parse_stop(self.stop)

    def width_and_bound(self, n_classes: int) -> tuple[int, float]:
        """The layer width n and the norm bound eps of a run on ``n_classes`` (Q) classes.

        The settings, or where unset the data-dependent defaults of
        :func:`dssfn_mpi.ssfn.model.default_width` and :func:`dssfn_mpi.ssfn.model.default_eps`.

        Raises
        ------
        UserError
            n does not exceed 2Q.
        """
        Q = n_classes
        hidden = self.hidden if self.hidden is not None else default_width(Q)
        require(
            hidden > 2 * Q,
            f"--hidden {hidden} must exceed 2Q = {2 * Q} (Q = {Q} classes): "
            f"the weight is [V_Q O; R] with n - 2Q random rows",
        )
        return hidden, (self.norm_bound if self.norm_bound is not None else default_eps(Q))

    def penalty_at(self, layer: int) -> float | None:
        """The ADMM penalty of ``layer`` for this mode (its algorithm's option: gamma for
        async, rho for sync; last value repeats), or ``None`` when it is ``auto``."""
        values = getattr(self, self.algorithm.penalty_option or "rho")
        if isinstance(values, str):
            return None
        return values[min(layer, len(values) - 1)]

    def metric_at(self, layer: int) -> bool:
        """Whether ``layer`` is solved in the Gram metric (:mod:`dssfn_mpi.ssfn.metric`): the
        input layer under ``--metric gram``, by the algorithms that have a metric form."""
        return layer == 0 and self.metric == "gram" and self.algorithm.metric_form

    def __post_init__(self) -> None:
        # the mode's own relaxations (an unknown mode fails in validate)
        alg = lookup(self.mode, self.update) if known(self.mode) else None
        if self.eta is None:
            self.eta = alg.step_size if alg else 1.0
        if self.relax is None:
            self.relax = alg.relax if alg else 1.0

    @property
    def algorithm(self) -> Any:
        """The :class:`~dssfn_mpi.algorithms.Algorithm` that ``mode`` and ``update`` name."""
        return lookup(self.mode, self.update).configured(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dictionary of every setting."""
        d = asdict(self)
        d["slow"] = {str(k): v for k, v in self.slow.items()}
        for key in ("gamma", "rho"):
            value = getattr(self, key)
            d[key] = value if isinstance(value, str) else list(value)
        return d

    def validate(self, world_size: int) -> None:
        """Check every setting that does not need the data; raise :class:`UserError`.

        Parameters
        ----------
        world_size : int
            Number of MPI ranks (graph nodes).
        """
        self._check_choices()
        self._check_ranges()
        self._check_ranks(world_size)

    def _check_choices(self) -> None:
        """Each named choice is one of its options."""
        require(self.wait in POLICIES,
                f"--wait {self.wait!r}: choose one of {', '.join(POLICIES)}")
        lookup(self.mode)  # a UserError naming the modes
        require(self.rma in RMA_PATHS,
                f"--rma {self.rma!r}: choose one of {', '.join(RMA_PATHS)}")
        require(
            self.update in UPDATES, f"--update {self.update!r}: choose one of {', '.join(UPDATES)}"
        )
        require(self.metric in METRICS,
                f"--metric {self.metric!r}: choose one of {', '.join(METRICS)}")
        require(
            self.central_solver in ("exact", "admm"),
            f"--central-solver {self.central_solver!r}: choose exact or admm",
        )

    def _check_ranges(self) -> None:
        """Each number within the range its help gives (> 2Q waits for the data)."""
        require(
            isinstance(self.layers, int) and self.layers >= 0,
            f"--layers must be an integer >= 0, got {self.layers!r}",
        )
        require(
            isinstance(self.iters, int) and self.iters >= 1,
            f"--iters (activations per node per layer) must be an integer >= 1, got {self.iters!r}",
        )
        require(
            math.isfinite(self.eta) and 0.0 < self.eta < 2.0,
            f"--eta must lie in (0, 2) (ARock step size), got {self.eta}",
        )
        require(
            math.isfinite(self.relax) and 0.0 < self.relax < 2.0,
            f"--relax must lie in (0, 2) (over-relaxation alpha), got {self.relax}",
        )
        if self.norm_bound is not None:
            require(
                math.isfinite(self.norm_bound) and self.norm_bound > 0,
                f"--norm-bound must be positive, got {self.norm_bound}",
            )
        if self.max_lead is not None:
            require(self.max_lead >= 0, f"--max-lead must be >= 0, got {self.max_lead}")
        require(math.isfinite(self.mix_tol) and 0.0 < self.mix_tol < 1.0,
                f"--mix-tol must lie in (0, 1), got {self.mix_tol}")
        if self.degree is not None:
            require(self.degree >= 1, f"--degree must be >= 1 (neighbours per node), "
                    f"got {self.degree}")
        require(self.seed >= 0, f"--seed must be >= 0, got {self.seed}")
        # (> 2Q is checked once the data, and so Q, is known)
        require(self.hidden is None or self.hidden >= 1,
                f"--hidden must be a width >= 1 (more than 2Q), got {self.hidden}")
        if self.mix_rounds is not None:
            require(self.mix_rounds >= 1, f"--mix-rounds must be >= 1, got {self.mix_rounds}")
        require(
            isinstance(self.log_every, int) and self.log_every >= 0,
            f"--log-every must be an integer >= 0 (0: only at the end), got {self.log_every!r}",
        )
        require(
            isinstance(self.snapshot_every, int) and self.snapshot_every >= 0,
            f"--snapshot-every must be an integer >= 0 (0: K // 20), got {self.snapshot_every!r}",
        )
        require(
            math.isfinite(self.trace_limit_mb) and self.trace_limit_mb >= 0,
            f"--trace-limit must be >= 0 megabytes (0: no trace), got {self.trace_limit_mb}",
        )
        require(
            math.isfinite(self.timeout) and self.timeout > 0,
            f"--timeout must be positive seconds, got {self.timeout}",
        )

    def _check_ranks(self, world_size: int) -> None:
        """What depends on the rank count, and the settings that need one another."""
        alg = self.algorithm
        if alg.max_ranks == 1:
            require(
                world_size == 1,
                f"--mode {self.mode} runs on one process, but {world_size} ranks were started: "
                "run it without mpirun (or with -n 1)",
            )
        else:
            require(
                world_size >= alg.min_ranks,
                f"--mode {self.mode} needs at least {alg.min_ranks} ranks (graph nodes): "
                "start it with mpirun -n M",
            )
        if self.fail_at is not None:
            require(self.fail_at[0] < world_size,
                    f"--fail-at: there are only {world_size} ranks (0..{world_size - 1})")
        for rank in self.slow:
            require(
                rank < world_size,
                f"--slow {rank}:...: there are only {world_size} ranks (0..{world_size - 1})",
            )
        if self.stop_rule.kind == "local":
            require(alg.local_stop, "--stop local reads the edge form's variables: "
                    "use it with --update edge (the default)")
        require(self.relax == alg.relax or alg.relaxes,
                f"--relax applies to consensus ADMM (sync, sync-graph), not --mode {self.mode}; "
                "the async edge update's relaxation is --eta")
        if self.topology == "file":
            require(self.edges is not None, "--topology file needs --edges PATH (an edge list)")
        self._check_driver_options()

    def _check_driver_options(self) -> None:
        """``--max-lead`` and ``--rma`` set the one-sided driver's bounded delay and write
        path: a value other than the default is an error where the mode's driver has
        neither."""
        if self.algorithm.one_sided:
            return
        defaults = {f.name: f.default for f in fields(self)}
        one_sided = ", ".join(dict.fromkeys(a.name for a in ALGORITHMS if a.one_sided))
        for key, flag in (("max_lead", "--max-lead"), ("rma", "--rma")):
            require(getattr(self, key) == defaults[key],
                    f"{flag} applies to the one-sided modes ({one_sided}), not --mode "
                    f"{self.mode}, whose driver does not use it")


def load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a JSON or TOML config file into a dict of :class:`TrainConfig` keys.

    Unknown keys and wrong types are user errors, so a typo never silently
    falls back to a default.
    """
    p = Path(path)
    require(p.is_file(), f"--config {p}: no such file")
    try:
        # Both formats are UTF-8 by definition, whatever the locale says.
        text = p.read_text(encoding="utf-8")
        data = _parse_toml(text, p) if p.suffix.lower() == ".toml" else json.loads(text)
    except ValueError as exc:  # also TOMLDecodeError and UnicodeDecodeError
        raise UserError(f"--config {p}: cannot parse it ({exc})") from None
    require(isinstance(data, dict), f"--config {p}: the top level must be a table/object")
    return from_mapping(data, TrainConfig, f"--config {p}", note=True)


def _parse_toml(text: str, path: Path) -> Any:
    """TOML with the standard library's tomllib (Python >= 3.11), else tomli, the same
    parser as a package (a dependency of dssfn-mpi on older Pythons)."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise UserError(
                f"--config {path}: reading TOML on Python < 3.11 needs the tomli package "
                "(a dependency of dssfn-mpi; pip install tomli), or use a .json file"
            ) from None
    return tomllib.loads(text)


def config_from_mapping(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Check and convert a mapping of :class:`TrainConfig` keys (config file, checkpoint).

    Unknown keys and wrong types are user errors, so a typo never silently
    falls back to a default.
    """
    return from_mapping(data, TrainConfig, source)


def config_from_args(args: Any) -> dict[str, Any]:
    """The :class:`TrainConfig` settings given on the command line, converted.

    ``args`` is the namespace of a parser built with :func:`add_train_arguments`;
    flags that were not given are left out (so presets can fill them).
    """
    return from_args(args, TrainConfig)


def add_train_arguments(parser: Any) -> dict[str, Any]:
    """Add a flag for every :class:`TrainConfig` setting; returns the argument groups."""
    return add_arguments(parser, TrainConfig)


def apply_preset(cfg: TrainConfig, explicit: set[str]) -> None:
    """Fill settings from ``cfg.preset`` unless the user set them explicitly.

    ``paper``: the paper's Table 3 gamma pair, eta = 0.5, the paper's update
    form (eq. 7) and its scalar penalty on every layer, sync rho = 1/mu (Table 3,
    sync dSSFN) in plain ADMM (relax 1), the central model by the authors' ADMM
    with Table 3's central mu, L = 20, n = 2Q + 1000, K = 200.
    """
    if cfg.preset is None:
        return
    require(cfg.preset == "paper", f"--preset {cfg.preset!r}: the only preset is 'paper'")
    table = PAPER_TABLE3.get(cfg.dataset)
    require(
        table is not None,
        f"--preset paper: the paper gives no settings for {cfg.dataset!r}; "
        f"it covers {', '.join(PAPER_TABLE3)}",
    )
    defaults = {
        "gamma": table["gamma"],
        "rho": tuple(1.0 / m for m in table["sync_mu"]),
        "central_solver": "admm",
        "mu": table["central_mu"],
        "eta": 0.5,
        "relax": 1.0,
        "update": "paper",
        "metric": "identity",
        "layers": 20,
        "iters": 200,
    }
    for key, value in defaults.items():
        if key not in explicit:
            setattr(cfg, key, value)
