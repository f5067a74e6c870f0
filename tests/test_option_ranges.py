"""Every numeric option against the range its help documents: a value outside is a user error.

The ranges are written here, from the help texts, independently of the code that checks
them; a new numeric option fails :func:`test_every_numeric_option_has_a_documented_range`
until it is added with its range.
"""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from dssfn_mpi import cli
from dssfn_mpi.config import TrainConfig, config_from_args
from dssfn_mpi.errors import UserError

# TrainConfig settings (train and simulate): values outside the documented range, and the
# edge of the range, which must be accepted.
TRAIN_RANGES = {
    "--degree": (["0", "-2"], "1"),                  # 1..M-1
    "--layers": (["-1"], "0"),                       # layers 0..L
    "--hidden": (["0", "-5"], "40"),                 # a width (> 2Q, checked with the data)
    "--iters": (["0", "-3"], "1"),                   # K >= 1
    "--eta": (["0", "2", "nan", "-1"], "1.9"),       # (0, 2)
    "--relax": (["0", "2", "nan", "-1"], "1.0"),     # (0, 2); other values need --mode sync
    "--norm-bound": (["0", "-1", "inf", "nan"], "1e-9"),  # > 0
    "--mix-tol": (["0", "1", "nan", "-1"], "1e-6"),  # (0, 1)
    "--mix-rounds": (["0"], "1"),                    # >= 1
    "--max-lead": (["-2", "-5"], "-1"),              # >= 0, or -1 = unbounded
    "--seed": (["-1"], "0"),                         # >= 0
    "--log-every": (["-1"], "0"),                    # >= 0
    "--snapshot-every": (["-1"], "0"),               # >= 0
    "--trace-limit": (["-1", "inf", "nan"], "0"),    # >= 0 MB
    "--timeout": (["0", "-1", "inf"], "0.5"),        # positive seconds
}
# Same for the options of the other commands, by command path.
OTHER_RANGES = {
    (("simulate",), "--nodes"): (["1", "0"], "2"),
    (("simulate",), "--jitter-seed"): (["-1"], "0"),
    (("replay",), "--jitter-seed"): (["-1"], "0"),
    (("replay",), "--seed"): (["-1"], "0"),
    (("replay",), "--eps"): (["0", "-1", "inf"], "1e-3"),
    (("evaluate",), "--seed"): (["-1"], "0"),
    (("plot",), "--eps"): (["0", "nan"], "1e-3"),
    **{(("bench", b), "--job-timeout"): (["0", "-5"], "1")
       for b in ("degree", "nodes", "table2", "straggler", "noise", "contention", "decompose")},
    **{(("bench", b), "--eps"): (["0", "-1e-2"], "1e-3")
       for b in ("degree", "nodes", "table2", "straggler", "noise", "contention", "decompose")},
    **{(("bench", b), "--to-eps"): (["0", "-1e-2"], "1e-2") for b in ("degree", "nodes", "table2")},
    (("bench", "table2"), "--seeds"): (["0"], "1"),
    (("bench", "penalty"), "--layers"): (["-1"], "0"),
    (("bench", "penalty"), "--nodes"): (["1", "0"], "2"),
    (("bench", "penalty"), "--degree"): (["0", "-1"], "1"),
    (("bench", "penalty"), "--iters"): (["0"], "1"),
    (("bench", "penalty"), "--to-eps"): (["0", "-1"], "1e-2"),
    (("bench", "penalty"), "--relax"): (["0", "2", "nan"], "1.5"),
    (("bench", "activation"), "--reps"): (["0"], "1"),
    (("bench", "activation"), "--classes"): (["0"], "1"),
    (("bench", "activation"), "--width"): (["0"], "1"),
    (("bench", "activation"), "--samples"): (["0"], "1"),
    (("bench", "links", "run"), "--reps"): (["0"], "1"),
    (("bench", "links", "run"), "--passes"): (["0"], "1"),
    (("bench", "links", "run"), "--job-timeout"): (["0"], "1"),
    (("bench", "crossover"), "--cap"): (["0"], "1"),
    (("bench", "crossover"), "--eps"): (["0", "-1e-2"], "1e-3"),
    (("bench", "crossover"), "--seed"): (["-1"], "0"),
    (("bench", "crossover"), "--job-timeout"): (["0", "-5"], "1"),
}
# What each command needs besides the option to parse.
NEEDS = {("replay",): ["x.h5"], ("evaluate",): ["m.h5", "--dataset", "digits"],
         ("plot",): ["f.h5"], ("bench", "links", "run"): ["--out", "x"]}


def _numeric_options(parser: argparse.ArgumentParser, path: tuple = ()) -> list:
    """(command path, flag, dest, type) of every option that parses a number."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _numeric_options(sub, (*path, name))
        elif action.option_strings and action.type is not None:
            yield path, action.option_strings[0], action.dest, action.type


SETTINGS = {f.name for f in dataclasses.fields(TrainConfig)}
NUMERIC = list(_numeric_options(cli.build_parser()))
TRAINING = (("train",), ("simulate",))
TRAIN_CASES = [(path[0], flag) for path, flag, dest, _ in NUMERIC
               if path in TRAINING and dest in SETTINGS and flag in TRAIN_RANGES]


def test_every_numeric_option_has_a_documented_range():
    for path, flag, dest, _kind in NUMERIC:
        if path in TRAINING and dest in SETTINGS:  # a TrainConfig setting
            assert flag in TRAIN_RANGES or flag == "--eps", (path, flag)  # --eps: renamed
        else:
            assert (path, flag) in OTHER_RANGES, (path, flag)
    assert {(p, f) for p, f, *_ in NUMERIC} >= set(OTHER_RANGES)


def _train_config(flag: str, value: str, command: str = "train") -> TrainConfig:
    args = cli.build_parser().parse_args([command, f"{flag}={value}"])
    cfg = TrainConfig(**config_from_args(args))
    cfg.validate(4)
    return cfg


@pytest.mark.parametrize("command, flag", TRAIN_CASES)
def test_train_settings_outside_their_range_are_user_errors(command, flag):
    bad, good = TRAIN_RANGES[flag]
    for value in bad:
        with pytest.raises(UserError, match=flag):
            _train_config(flag, value, command)
    _train_config(flag, good, command)


@pytest.mark.parametrize("path, flag", sorted(OTHER_RANGES))
def test_other_options_outside_their_range_are_one_line_errors(path, flag, capsys):
    bad, good = OTHER_RANGES[(path, flag)]
    needs = NEEDS.get(path, [])
    for value in bad:
        with pytest.raises(SystemExit) as exc:
            cli.build_parser().parse_args([*path, *needs, f"{flag}={value}"])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0] and value in err[0], err
    cli.build_parser().parse_args([*path, *needs, f"{flag}={good}"])


@pytest.mark.parametrize("argv, fragment", [
    (["straggler", "--values", "0.5"], "factors must be >= 1"),
    (["degree", "--set", "iters=0"], "iters=0: must be >= 1"),
    (["degree", "--set", "layers=-1"], "layers=-1: must be >= 0"),
    (["degree", "--set", "hidden=-5"], "hidden=-5: must be >= 1"),
    (["degree", "--set", "sync_graph_iters=0"], "must be >= 1"),
    (["degree", "--set", "stop=eps:-1"], "--stop"),
    (["table2", "--set", "seeds=0"], "seeds=0: must be >= 1"),
    (["rma", "--set", "reps=0"], "reps=0: must be >= 1"),
])
def test_bench_values_and_preset_overrides_outside_their_range(argv, fragment, capsys):
    assert cli.main(["bench", *argv, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err


def test_fail_at_needs_a_layer_that_exists():
    with pytest.raises(UserError, match="--fail-at"):
        _train_config("--fail-at", "0:-1")
