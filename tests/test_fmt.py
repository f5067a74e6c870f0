"""Tests for dssfn_mpi.fmt: numbers as text, '-' for what was not measured."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dssfn_mpi.fmt import MISSING, number, percent, setting


@pytest.mark.parametrize(
    ("value", "spec", "text"),
    [
        (1.23456, ".3f", "1.235"),
        (np.float64(3e-2), ".3e", "3.000e-02"),
        (np.int64(60), ".4g", "60"),
        (7, "d", "7"),
        (0.0, ".2f", "0.00"),
        (-2.5, ".1f", "-2.5"),
    ],
)
def test_number(value, spec, text) -> None:
    assert number(value, spec) == text


@pytest.mark.parametrize(
    "value", [None, math.nan, np.nan, math.inf, -np.inf, "x", np.float32("nan")]
)
def test_number_missing(value) -> None:
    assert number(value, ".3f") == MISSING == "-"


def test_percent() -> None:
    assert percent(0.925, ".2f") == "92.50"
    assert percent(np.float64(0.5)) == "50.0"
    assert percent(0.5, suffix=" %") == "50.0 %"
    assert percent(math.nan, suffix=" %") == "-"
    assert percent(None) == "-"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        ("", "-"),
        (-1, "-"),
        (np.int64(-1), "-"),
        (0, "0"),
        (np.int64(4), "4"),
        ("ring", "ring"),
        (True, "True"),
        (-1.0, "-1.0"),
        (-2, "-2"),
    ],
)
def test_setting(value, text) -> None:
    assert setting(value) == text
