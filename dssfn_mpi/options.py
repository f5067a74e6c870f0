"""Settings declared once, as dataclass fields; the command line and config files derive from them.

A setting is a field of a dataclass (:class:`dssfn_mpi.config.TrainConfig`)
whose default is made by :func:`option`: the field gives the name, the type
and the default, the option its help text, its help section and, where plain
type checking is not enough, its parser. From that one declaration

* :func:`add_arguments` builds the ``argparse`` flags (``--max-lead`` for
  ``max_lead``; every flag defaults to ``None`` so "not given" is visible);
* :func:`from_args` converts what was given on the command line;
* :func:`from_mapping` checks and converts a config file's (or checkpoint's)
  values, refusing unknown keys and wrong types.

A renamed setting keeps its old flag and config key working (``renamed_from``),
each use noted in one line on stderr (:func:`note_renamed`).

Adding a setting is one field, e.g.
``log_every: int = option("output", "rewrite the log every N layers ({default})", 1)``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Callable

from .errors import UserError, require
from .launch import launcher_rank

__all__ = ["HelpFormatter", "NETWORK_VALUES", "Option", "RenamedFlag", "add_arguments",
           "add_eps_option", "add_jitter_options", "add_network_option", "at_least", "from_args",
           "from_mapping", "note_renamed", "option", "positive", "relaxation", "wrong_type"]

# A parser turns a value from the command line (``source is None``) or from a
# file (``source`` names it, for messages) into the setting; it raises UserError.
Parser = Callable[[Any, "str | None"], Any]

_SCALARS = {"int": int, "float": float, "str": str, "bool": bool}
_EXPECTED = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true/false"}


@dataclass(frozen=True)
class Option:
    """How one setting appears to users (the field itself holds name, type and default).

    Attributes
    ----------
    group : str
        Help section of the command line (``data``, ``method``, ``output``).
    help : str or None
        Help text; ``{default}`` is replaced by the field's default. ``None``:
        config files only, no command-line flag.
    flag : str or None
        The flag, ``--`` + the name with dashes unless given. A ``bool``
        setting whose default is true gets a flag that turns it off (``--no-check``).
    parse : callable or None
        ``parse(value, source)`` for settings that are not a plain ``int``,
        ``float``, ``str`` or ``bool``; for plain ones it runs after the type check.
    metavar : str or None
        Placeholder in ``--help``.
    repeatable : bool
        The flag may be given several times; the setting gets the list.
    renamed_from : str or None
        The setting's former name: its flag and config key are still
        accepted, with a one-line note (:func:`note_renamed`).
    hidden : bool
        Left out of ``--help`` (a flag for tests, e.g. fault injection).
    """

    group: str
    help: str | Callable[[], str] | None
    flag: str | None = None
    parse: Parser | None = None
    metavar: str | None = None
    repeatable: bool = False
    renamed_from: str | None = None
    hidden: bool = False


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` with each option's default shown, unless its help already says it.

    A description or epilog with line breaks is printed as written (others are
    wrapped). Options whose default is ``None`` or ``False`` (not given, a
    switch) show none.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (default is None or default is False or default == argparse.SUPPRESS
                or "default" in text or not action.option_strings or isinstance(default, list)):
            return text
        return text + " (default: %(default)s)"


def at_least(low: int) -> Callable[[str], int]:
    """argparse ``type`` of an integer option documented as ``>= low``.

    A value below is a bad command line (one line, exit 2), not a failure later.
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def positive(text: str) -> float:
    """argparse ``type`` of a float option documented as positive (and finite)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def relaxation(text: str) -> float:
    """argparse ``type`` of a relaxation (``--relax``, ``--eta``): a number in (0, 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 2), got {text!r}") from None
    if not 0.0 < value < 2.0:  # nan fails too
        raise argparse.ArgumentTypeError(f"must lie in (0, 2), got {text}")
    return value


#: The values ``--network`` takes, in every command that models a network.
NETWORK_VALUES = ("shm (this machine), ib (HDR InfiniBand), eth10 (10 GbE TCP) or "
                  "alpha=SECONDS,beta=BYTES_PER_S (docs/REPLAY.md)")


def add_network_option(p: Any, what: str, default: str | None = "shm") -> None:
    """``--network``, declared once: ``what`` it prices, then :data:`NETWORK_VALUES`."""
    p.add_argument("--network", default=default, metavar="NAME",
                   help=f"{what}: {NETWORK_VALUES}")


def add_eps_option(p: Any, what: str = "of the time to eps") -> None:
    """``--eps``, the target relative distance to O* (``what`` it is the target of)."""
    p.add_argument("--eps", type=positive, default=1e-2,
                   help=f"target relative distance to O* {what} (> 0)")


def add_jitter_options(p: Any) -> None:
    """``--jitter`` and ``--jitter-seed``: each activation's compute time scaled, the same
    draws in replay and simulate."""
    p.add_argument("--jitter", metavar="exp:MEAN|lognormal:SIGMA",
                   help="each activation's compute times 1 + Exp(MEAN), or exp(N(0, SIGMA^2))")
    p.add_argument("--jitter-seed", type=at_least(0), default=0,
                   help="seed of the jitter, >= 0")


def note_renamed(old: str, new: str) -> None:
    """Say once, on stderr, that ``old`` is now ``new`` (from one rank under a launcher)."""
    if launcher_rank() == 0:
        print(f"dssfn-mpi: note: {old} is deprecated, use {new}", file=sys.stderr, flush=True)


class RenamedFlag(argparse.Action):
    """A former flag, still accepted: stores into the new flag's setting, with a note.

    Added with ``help=argparse.SUPPRESS`` beside the new flag, e.g.
    ``p.add_argument("--replay", dest="network", action=RenamedFlag, new="--network")``.
    """

    def __init__(self, option_strings: list[str], dest: str, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        note_renamed(str(option_string), self.new)
        setattr(namespace, self.dest, values)


def option(group: str, help: str | None, default: Any = None, *,
           default_factory: Callable[[], Any] | None = None, **how: Any) -> Any:
    """A dataclass field declaring a setting (see :class:`Option` for ``how``).

    Parameters
    ----------
    group : str
        Help section.
    help : str or None
        Help text, may contain ``{default}``; a callable gives it when the parser is built
        (text naming the registered algorithms); ``None`` for config-file-only settings.
    default : object
        The default value (use ``default_factory`` for mutable ones).
    default_factory : callable, optional
        Builds the default.
    **how
        ``flag``, ``parse``, ``metavar``, ``repeatable`` of :class:`Option`.
    """
    meta = {"option": Option(group=group, help=help, **how)}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class _Setting:
    """One declared field: its name, option, plain type (or None) and default."""

    name: str
    opt: Option
    scalar: str | None
    default: Any

    @property
    def flag(self) -> str:
        if self.opt.flag is not None:
            return self.opt.flag
        if self.scalar == "bool" and self.default is True:
            return "--no-" + self.name.replace("_", "-")
        return "--" + self.name.replace("_", "-")


def _scalar(annotation: Any) -> str | None:
    """``"int"`` for ``int`` or ``int | None`` (likewise float, str, bool); else None."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    parts = {p.strip() for p in text.split("|")} - {"None"}
    return parts.pop() if len(parts) == 1 and next(iter(parts)) in _SCALARS else None


def _settings(cls: type) -> list[_Setting]:
    out = []
    for f in dataclasses.fields(cls):
        opt = f.metadata.get("option")
        if opt is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with option()")
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        scalar = _scalar(f.type)
        if scalar is None and opt.parse is None:
            raise TypeError(f"{cls.__name__}.{f.name}: a {f.type} setting needs parse=")
        out.append(_Setting(f.name, opt, scalar, default))
    return out


def add_arguments(parser: argparse.ArgumentParser, cls: type,
                  groups: dict[str, Any] | None = None,
                  only: Collection[str] | None = None) -> dict[str, Any]:
    """Add a flag for every command-line setting of ``cls`` to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    cls : type
        Dataclass whose fields are declared with :func:`option`.
    groups : dict, optional
        Argument groups by name, created in order of first use when missing.
    only : collection of str, optional
        Add only these settings (another command's subset, e.g. ``simulate``).

    Returns
    -------
    dict
        The argument groups by name (to add command-specific flags to them).
    """
    groups = {} if groups is None else groups
    for s in _settings(cls):
        if s.opt.help is None or (only is not None and s.name not in only):
            continue
        if s.opt.group not in groups:
            groups[s.opt.group] = parser.add_argument_group(s.opt.group)
        text = s.opt.help() if callable(s.opt.help) else s.opt.help
        helptext = argparse.SUPPRESS if s.opt.hidden else text.format(default=s.default)
        kwargs: dict[str, Any] = {"dest": s.name, "default": None, "help": helptext}
        if s.scalar == "bool":
            kwargs["action"] = "store_false" if s.default is True else "store_true"
        else:
            if s.scalar in ("int", "float"):
                kwargs["type"] = _SCALARS[s.scalar]
            if s.opt.repeatable:
                kwargs["action"] = "append"
            if s.opt.metavar is not None:
                kwargs["metavar"] = s.opt.metavar
        groups[s.opt.group].add_argument(s.flag, **kwargs)
        if s.opt.renamed_from is not None:
            old = {k: v for k, v in kwargs.items() if k not in ("help", "action")}
            groups[s.opt.group].add_argument("--" + s.opt.renamed_from.replace("_", "-"),
                                             help=argparse.SUPPRESS, action=RenamedFlag,
                                             new=s.flag, **old)
    return groups


def from_args(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The settings given on the command line (absent flags are left out), converted."""
    out: dict[str, Any] = {}
    for s in _settings(cls):
        value = getattr(args, s.name, None) if s.opt.help is not None else None
        if value is None:
            continue
        out[s.name] = s.opt.parse(value, None) if s.opt.parse is not None else value
    return out


def wrong_type(source: str, key: str, value: Any, expected: str) -> UserError:
    """The error for a config value of the wrong type."""
    return UserError(f"{source}: {key} = {value!r} has the wrong type ({expected})")


def _check_scalar(s: _Setting, value: Any, source: str) -> Any:
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }[s.scalar]
    if not ok:
        raise wrong_type(source, s.name, value, f"expected {_EXPECTED[s.scalar]}")
    return float(value) if s.scalar == "float" else value


def from_mapping(data: dict[str, Any], cls: type, source: str,
                 note: bool = False) -> dict[str, Any]:
    """Check and convert a mapping of settings of ``cls`` (config file, checkpoint).

    Keys may use dashes or underscores. Unknown keys and wrong types are user
    errors, so a typo never silently falls back to a default. ``None`` is
    accepted for plain settings (their "not set"). A setting's former name
    (``renamed_from``) is read as the setting, noted on stderr when ``note``
    (a user's file; a saved configuration is read quietly).
    """
    settings = _settings(cls)
    known = {s.name: s for s in settings}
    renamed = {s.opt.renamed_from: s.name for s in settings if s.opt.renamed_from}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name in renamed:
            require(not any(k.replace("-", "_") == renamed[name] for k in data),
                    f"{source}: {key!r} is the former name of {renamed[name]!r}; keep one")
            if note:
                note_renamed(f"{source}: key {key!r}", repr(renamed[name]))
            name = renamed[name]
        require(name in known, f"{source}: unknown key {key!r}; valid keys: {', '.join(known)}")
        s = known[name]
        if s.scalar is not None:
            if value is None:
                out[name] = None
                continue
            value = _check_scalar(s, value, source)
        out[name] = s.opt.parse(value, source) if s.opt.parse is not None else value
    return out
