"""Settings declared once: the train flags and config-file checks come from TrainConfig."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from dssfn_mpi import cli
from dssfn_mpi.config import TrainConfig, config_from_args, config_from_mapping
from dssfn_mpi.errors import InjectedFailure, UserError
from dssfn_mpi.options import add_arguments, from_args, from_mapping, option


def _train_args(argv):
    return cli.build_parser().parse_args(["train", *argv])


# A non-default value of every command-line setting, as flags and as a config file.
EVERYTHING = {
    "dataset": "vowel", "data_dir": "/data", "partition": "stratified", "mode": "sync",
    "update": "paper", "topology": "ring", "degree": 4, "edges": "g.txt", "layers": 3,
    "hidden": 50, "iters": 7, "gamma": "2,0.5", "eta": 0.5, "relax": 1.5, "rho": "3",
    "norm_bound": 4.0,
    "central_solver": "admm", "mu": "10,100", "mix_rounds": 5, "mix_tol": 1e-6, "max_lead": 2,
    "seed": 9, "wait": "hybrid", "rma": "put", "metric": "identity",
    "slow": ["1:3"], "preset": "paper", "out": "o.h5", "overwrite": True, "check": False,
    "evaluate": False, "log_every": 2, "timeout": 60.0, "save_model": "m.h5", "fail_at": "1:2:kill",
    "snapshot_every": 5, "trace_limit_mb": 12.5, "stop": "eps:1e-2",
}
FLAGS = {"check": ["--no-check"], "evaluate": ["--no-eval"], "overwrite": ["--overwrite"],
         "slow": ["--slow", "1:3"], "trace_limit_mb": ["--trace-limit", "12.5"]}


def _argv(values):
    argv = []
    for key, value in values.items():
        argv += FLAGS.get(key, [f"--{key.replace('_', '-')}", str(value)])
    return argv


def test_every_setting_but_dataset_options_has_a_flag():
    on_cli = set(vars(_train_args([])))
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    assert names - on_cli == {"dataset_options"}
    assert set(EVERYTHING) == names - {"dataset_options"}
    # Nothing given: nothing set, so config files and presets can fill every setting.
    assert config_from_args(_train_args([])) == {}


def test_command_line_and_config_file_give_the_same_settings():
    from_cli = config_from_args(_train_args(_argv(EVERYTHING)))
    from_file = config_from_mapping(EVERYTHING, "test")
    assert from_cli == from_file
    assert from_cli["gamma"] == (2.0, 0.5) and from_cli["mu"] == (10.0, 100.0)
    assert from_cli["slow"] == {1: 3.0} and from_cli["fail_at"] == (1, 2, "kill")
    assert from_cli["check"] is False and from_cli["overwrite"] is True
    assert isinstance(from_file["timeout"], float)
    cfg = TrainConfig(**from_cli)
    for key in ("layers", "iters", "degree", "seed", "eta", "timeout", "out"):
        assert getattr(cfg, key) == EVERYTHING[key]
    assert cfg.stop == "eps:0.01"  # kept in one spelling


def test_unbounded_lead_and_auto_mu_from_either_source():
    assert config_from_args(_train_args(["--max-lead", "-1"])) == {"max_lead": None}
    assert config_from_mapping({"max-lead": -1}, "f") == {"max_lead": None}
    with pytest.raises(UserError, match="^--mu cannot be auto$"):
        config_from_args(_train_args(["--mu", "auto"]))
    with pytest.raises(UserError, match=r"^f: mu = 'auto' has the wrong type \(mu cannot be auto"):
        config_from_mapping({"mu": "auto"}, "f")
    with pytest.raises(UserError, match=r"expected a list"):
        config_from_mapping({"slow": 3}, "f")
    with pytest.raises(UserError, match=r"expected a table"):
        config_from_mapping({"dataset_options": [1]}, "f")


def test_help_shows_the_declared_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # help wraps with the terminal width
    assert "solved (10)" in text and "per layer (200)" in text and "aborting (600)" in text
    assert "default 4; -1 = unbounded" in text
    from dssfn_mpi.ssfn.solver import AUTHORS_ADMM_ITERS

    assert f"{AUTHORS_ADMM_ITERS} iterations" in text


def test_a_new_setting_is_one_declaration():
    @dataclasses.dataclass
    class Toy:
        log_every: int = option("output", "rewrite the log every N layers ({default})", 1)
        tag: str | None = option("data", "a label")
        fast: bool = option("output", "go faster", False)
        table: dict = option("data", None, default_factory=dict,
                             parse=lambda v, source: dict(v))

    parser = argparse.ArgumentParser()
    add_arguments(parser, Toy)
    assert "every N layers (1)" in parser.format_help()
    args = parser.parse_args(["--log-every", "5", "--fast"])
    assert from_args(args, Toy) == {"log_every": 5, "fast": True}
    assert from_mapping({"log-every": 3, "tag": None}, Toy, "t") == {"log_every": 3, "tag": None}
    with pytest.raises(UserError, match="expected an integer"):
        from_mapping({"log_every": "3"}, Toy, "t")
    with pytest.raises(UserError, match="unknown key"):
        from_mapping({"log_evry": 3}, Toy, "t")
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-every", "x"])


def test_undeclared_setting_is_refused():
    @dataclasses.dataclass
    class Bad:
        plain: int = 3

    with pytest.raises(TypeError, match="option"):
        add_arguments(argparse.ArgumentParser(), Bad)


def test_config_file_and_flags_merge_with_the_preset(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"dataset": "satimage", "preset": "paper", "eta": 0.9}))
    cfg = cli._train_config(_train_args(["--config", str(path), "--layers", "4"]))
    assert cfg.eta == 0.9 and cfg.layers == 4  # given: kept
    assert cfg.update == "paper" and cfg.central_solver == "admm"  # not given: the preset's


@pytest.mark.parametrize("exc, traceback_printed", [
    (InjectedFailure("planned"), False),
    (RuntimeError("a bug"), True),
    # Same class name, different type: a bug, so its traceback is printed.
    (type("InjectedFailure", (RuntimeError,), {})("imposter"), True),
])
def test_injected_failure_is_caught_by_type(monkeypatch, capsys, exc, traceback_printed):
    def boom(args, argv):
        raise exc

    monkeypatch.setattr(cli, "_cmd_train", boom)
    assert cli.main(["train", "--dataset", "digits"]) == 1
    err = capsys.readouterr().err
    assert ("Traceback" in err) == traceback_printed
    assert f"failed: {exc}; aborting the job" in err
