"""One vocabulary on the command line: renamed flags, bench subcommands, help, --json, exits."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dssfn_mpi import cli
from dssfn_mpi.bench.sweeps.jobs import prepare_output
from dssfn_mpi.bench.sweeps.parser import SWEEPS, TOOLS
from dssfn_mpi.config import TrainConfig, config_from_args, load_config_file
from dssfn_mpi.errors import UserError
from dssfn_mpi.options import HelpFormatter

REPO = Path(__file__).resolve().parents[1]
NOTE = "dssfn-mpi: note:"


def _dssfn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dssfn_mpi", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def _subparser(*path: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _flags(*path: str) -> set[str]:
    return {s for a in _subparser(*path)._actions for s in a.option_strings}


# --------------------------------------------------------------------------- renamed flags


def test_norm_bound_is_the_flag_and_eps_still_works_with_a_note(capsys):
    args = cli.build_parser().parse_args(["train", "--norm-bound", "3"])
    assert config_from_args(args) == {"norm_bound": 3.0}
    assert capsys.readouterr().err == ""
    args = cli.build_parser().parse_args(["simulate", "--eps", "4"])
    assert config_from_args(args) == {"norm_bound": 4.0}
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{NOTE} --eps is deprecated, use --norm-bound"]
    assert "--norm-bound" in _help(capsys, "train") and "--eps" not in _help(capsys, "train")


def test_deprecated_eps_on_the_command_line_gives_one_note_and_the_new_name(tmp_path):
    res = _dssfn("train", "--mode", "central", "--eps", "0", "--out", str(tmp_path / "r.h5"))
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [f"{NOTE} --eps is deprecated, use --norm-bound",
                                       "dssfn-mpi: error: --norm-bound must be positive, got 0.0"]
    assert not list(tmp_path.iterdir())


def test_config_file_key_eps_is_read_as_norm_bound_with_a_note(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"eps": 5.0}))
    assert load_config_file(path) == {"norm_bound": 5.0}
    err = capsys.readouterr().err
    assert err.count(NOTE) == 1 and "'eps'" in err and "'norm_bound'" in err
    path.write_text(json.dumps({"eps": 5.0, "norm-bound": 6.0}))
    with pytest.raises(UserError, match="former name"):
        load_config_file(path)
    path.write_text(json.dumps({"norm_bound": 6.0}))
    assert load_config_file(path) == {"norm_bound": 6.0}
    assert capsys.readouterr().err == ""


def test_the_jitter_seed_has_one_name_in_replay_and_simulate(capsys):
    for command in ("replay", "simulate"):
        assert "--jitter-seed" in _flags(command), command
    args = cli.build_parser().parse_args(["replay", "x.h5", "--seed", "7"])
    assert args.jitter_seed == 7
    assert capsys.readouterr().err.strip() == f"{NOTE} --seed is deprecated, use --jitter-seed"
    assert "--seed" not in _help(capsys, "replay")
    # simulate's --seed is the run's seed (split, graph, weights), as train's
    args = cli.build_parser().parse_args(["simulate", "--seed", "3", "--jitter-seed", "4"])
    assert (args.seed, args.jitter_seed) == (3, 4)


def test_report_network_replaces_report_replay(capsys):
    args = cli.build_parser().parse_args(["report", "r.h5", "--network", "ib"])
    assert args.network == "ib" and capsys.readouterr().err == ""
    args = cli.build_parser().parse_args(["report", "r.h5", "--replay", "eth10"])
    assert args.network == "eth10"
    assert capsys.readouterr().err.strip() == f"{NOTE} --replay is deprecated, use --network"
    assert "--replay" not in _help(capsys, "report")


# --------------------------------------------------------------------------- help


def test_fail_at_works_but_is_not_in_the_help(capsys):
    assert config_from_args(cli.build_parser().parse_args(["train", "--fail-at", "1:2"])) == {
        "fail_at": (1, 2, "raise")}
    assert "--fail-at" not in _help(capsys, "train")


@pytest.mark.parametrize("command", ["plot", "report", "evaluate", "doctor", "train", "replay",
                                     "simulate", "data"])
def test_every_command_has_a_description_and_the_exit_statuses(capsys, command):
    parser = _subparser(command)
    assert parser.description and len(parser.description) > 40, command
    text = _help(capsys, command)
    for status in ("2   user error", "1   failure", "75  stopped at the time limit"):
        assert status in text, (command, status)


def test_doctor_says_to_run_it_under_mpirun_n_2_and_exit_75_is_the_stop_status(capsys):
    from dssfn_mpi.run.jobstop import EXIT_STOPPED

    assert "mpirun -n 2" in _subparser("doctor").description
    assert f"{EXIT_STOPPED}  stopped" in cli.EXIT_STATUS_HELP
    assert "exit status:" in _help(capsys)


# --------------------------------------------------------------------------- bench


def test_every_command_and_bench_subcommand_names_the_function_that_runs_it():
    from dssfn_mpi.bench.sweeps.command import SPECS

    assert set(SPECS) == set(SWEEPS)  # every sweep builds its configurations
    commands = _subparser()._actions
    names = next(a for a in commands if isinstance(a, argparse._SubParsersAction)).choices
    for name in names:
        assert callable(_subparser(name).get_default("func")), name
    for name in [*SWEEPS, "rma", "collect", *TOOLS]:
        assert callable(_subparser("bench", name).get_default("bench_func")), name


@pytest.mark.parametrize("name", [*SWEEPS, "rma", "collect", *TOOLS])
def test_every_bench_subcommand_has_its_own_help(capsys, name):
    text = _help(capsys, "bench", name)
    assert text.startswith(f"usage: dssfn-mpi bench {name} ")
    assert "exit status:" in text


def test_bench_degree_help_lists_what_degree_takes_with_the_preset_defaults(capsys):
    flags = _flags("bench", "degree")
    assert {"--preset", "--out", "--values", "--modes", "--network", "--eps",
            "--dry-run", "--job-timeout", "--set", "--launcher", "--data-dir"} <= flags
    assert not flags & {"--datasets", "--seeds", "--kind"}
    text = " ".join(_help(capsys, "bench", "degree").split())
    assert "node degrees d" in text and "quick: 2,4,5" in text and "(default: quick)" in text
    # the straggler modes come from the presets, the one list of them
    text = " ".join(_help(capsys, "bench", "straggler").split())
    assert "async-unbounded" in text and "sync-graph" in text
    assert {"--kind", "--out"} <= _flags("bench", "collect")
    assert not _flags("bench", "collect") & {"--preset", "--values", "--network"}
    assert "--datasets" in _flags("bench", "table2")


def test_bench_dry_run_needs_no_out_and_a_real_run_does(tmp_path):
    res = _dssfn("bench", "degree", "--dry-run", "--values", "2")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1 + 3 and all("--out" in ln for ln in lines)
    res = _dssfn("bench", "degree")
    assert res.returncode == 2
    assert res.stderr.strip() == ("dssfn-mpi: error: bench degree needs --out FILE.h5 "
                                  "(only --dry-run goes without)")


def test_bench_out_creates_its_folder(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "sweep.h5"
    assert prepare_output(out, False, dry_run=True) == out
    assert not (tmp_path / "a").exists()  # a dry run creates nothing
    assert "does not exist yet" in capsys.readouterr().err
    assert prepare_output(out, False, dry_run=False) == out
    assert out.parent.is_dir() and not out.exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="is not a directory"):
        prepare_output(tmp_path / "file" / "x.h5", False, dry_run=False)
    with pytest.raises(UserError, match="cannot create its folder"):
        prepare_output(tmp_path / "file" / "sub" / "x.h5", False, dry_run=False)


def test_bench_tools_run_as_subcommands(tmp_path):
    res = _dssfn("bench", "penalty", "--powers", "x")
    assert res.returncode == 2
    assert res.stderr.strip() == ("dssfn-mpi: error: --powers 'x': expected comma-separated "
                                  "integers")
    res = _dssfn("bench", "links", "table", str(tmp_path))
    assert res.returncode == 2 and res.stderr.startswith("dssfn-mpi: error:"), res.stderr
    res = _dssfn("bench", "accuracy", "--sim", "--out", str(tmp_path / "f.png"))
    assert res.returncode == 0 or "matplotlib" in res.stderr, res.stderr


# --------------------------------------------------------------------------- --json


def test_data_list_json(tmp_path):
    res = _dssfn("data", "list", "digits", "vowel", "--data-dir", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert set(obj["datasets"]) == {"digits", "vowel"}
    assert obj["datasets"]["digits"]["files"] == []
    assert {f["status"] for f in obj["datasets"]["vowel"]["files"]} == {"missing"}
    assert obj["datasets"]["vowel"]["status"].startswith("not present")
    res = _dssfn("data", "verify", "--json")
    assert res.returncode == 2 and "data list" in res.stderr


def test_report_json_gives_the_table_numbers(tmp_path):
    from test_report import report_layers

    from dssfn_mpi.runlog import write_runlog

    path = tmp_path / "run.h5"
    write_runlog(path, {"mode": "sync", "nodes": 3, "layers": 1}, report_layers())
    res = _dssfn("report", str(path), "--json")
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert obj["attrs"]["mode"] == "sync" and obj["layers_done"] == 2
    row0, row1 = obj["layers"]
    assert row0["total_seconds_max"] == 4.0 and row0["test_accuracy_min"] == 0.8
    assert row1["rel_distance_max"] is None  # not measured
    assert obj["total_seconds"] == 7.0
    res = _dssfn("report", str(path), "--json", "--network", "ib")
    assert res.returncode == 2 and "trace" in res.stderr  # no trace: cannot be projected


def test_help_formatter_shows_defaults_once():
    text = TrainConfig.__dataclass_fields__["iters"].metadata["option"].help
    assert "{default}" in text  # train's own helps say their defaults
    parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    parser.add_argument("--a", type=int, default=3, help="a number")
    parser.add_argument("--b", default=0, type=int, help="zero")
    parser.add_argument("--c", default=5, help="c (default 5)")
    parser.add_argument("--d", action="store_true", help="switch")
    text = parser.format_help()
    assert "a number (default: 3)" in text and "zero (default: 0)" in text
    assert "(default 5)" in text and "default: 5" not in text
    assert "switch\n" in text
