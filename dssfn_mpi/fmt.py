"""Numbers as text for tables and progress lines: one rule for what was not measured.

Everything the package prints goes through these, so a value that was not
measured (None, NaN, inf, or an unset setting) reads ``-`` everywhere.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["MISSING", "number", "percent", "setting"]

#: What an unmeasured number or an unset setting prints as.
MISSING = "-"


def _finite(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(value)
    except TypeError:  # not a real number
        return False


def number(value: float | None, spec: str) -> str:
    """``format(value, spec)``, or :data:`MISSING` for None, NaN or inf.

    Parameters
    ----------
    value
        A real number (Python or numpy scalar) or None.
    spec
        A format specification, e.g. ``".3f"`` or ``".2e"``.

    Returns
    -------
    str
        The formatted number, or ``"-"``.
    """
    return format(value, spec) if _finite(value) else MISSING


def percent(fraction: float | None, spec: str = ".1f", suffix: str = "") -> str:
    """A fraction in 0..1 as a percentage, ``number(100 * fraction, spec) + suffix``.

    Parameters
    ----------
    fraction
        E.g. an accuracy; None, NaN or inf print as :data:`MISSING`.
    spec
        Format of the percentage.
    suffix
        Appended only to a printed number (e.g. ``" %"``), not to ``"-"``.

    Returns
    -------
    str
        For example ``percent(0.925, ".2f") == "92.50"``.
    """
    if not _finite(fraction):
        return MISSING
    assert fraction is not None
    return number(100.0 * fraction, spec) + suffix


def setting(value: Any) -> str:
    """A configuration value as text; :data:`MISSING` when unset.

    Parameters
    ----------
    value
        Anything; None, ``""`` and the integer ``-1`` (the run log's "not
        applicable") count as unset.

    Returns
    -------
    str
        ``str(value)`` or ``"-"``.
    """
    if value is None or (isinstance(value, str) and value == ""):
        return MISSING
    # numpy integers are Integral too; a bool is not a count.
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value == -1:
        return MISSING
    return str(value)
