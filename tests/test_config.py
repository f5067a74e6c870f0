"""Settings: parsing, presets, validation and config files (no MPI)."""

import json
import sys
import types
from pathlib import Path

import pytest

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.algorithms.stoprule import StopRule
from dssfn_mpi.config import (
    MODES,
    PAPER_TABLE3,
    TrainConfig,
    apply_preset,
    config_from_mapping,
    load_config_file,
    parse_fail_at,
    parse_per_layer,
    parse_slow,
)
from dssfn_mpi.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def test_per_layer_values_repeat_the_last():
    cfg = TrainConfig(mode="async", gamma=parse_per_layer("10,0.5,0.1", "gamma"))
    assert [cfg.penalty_at(layer) for layer in range(5)] == [10, 0.5, 0.1, 0.1, 0.1]
    cfg = TrainConfig(mode="sync", rho=parse_per_layer("2", "rho"))
    assert cfg.penalty_at(7) == 2.0
    assert TrainConfig(mode="sync").penalty_at(0) is None  # auto by default
    assert parse_per_layer("auto", "gamma") == "auto"


@pytest.mark.parametrize("text", ["", "0", "-1", "nan", "1,x", "inf"])
def test_bad_per_layer_values(text):
    with pytest.raises(UserError):
        parse_per_layer(text, "gamma")


def test_slow_and_fail_at():
    assert parse_slow(["3:5", "0:1.5"]) == {3: 5.0, 0: 1.5}
    for bad in (["3"], ["a:2"], ["1:0.5"], ["-1:2"]):
        with pytest.raises(UserError):
            parse_slow(bad)
    assert parse_fail_at("2:4") == (2, 4, "raise")
    assert parse_fail_at("2:4:kill") == (2, 4, "kill")
    for bad in ("2", "x:1", "1:2:boom"):
        with pytest.raises(UserError):
            parse_fail_at(bad)


def test_paper_preset_fills_only_what_was_not_given():
    cfg = TrainConfig(dataset="satimage", preset="paper", eta=0.9)
    apply_preset(cfg, explicit={"eta"})
    assert cfg.gamma == PAPER_TABLE3["satimage"]["gamma"]
    assert cfg.rho == tuple(1 / m for m in PAPER_TABLE3["satimage"]["sync_mu"])
    assert cfg.update == "paper" and cfg.layers == 20 and cfg.central_solver == "admm"
    assert cfg.eta == 0.9
    with pytest.raises(UserError, match="no settings"):
        apply_preset(TrainConfig(dataset="digits", preset="paper"), set())


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"eta": 2.0}, "--eta"),
        ({"iters": 0}, "--iters"),
        ({"mode": "central"}, "one process"),
        ({"slow": {5: 2.0}}, "--slow"),
        ({"max_lead": -2}, "--max-lead"),
        ({"topology": "file"}, "--edges"),
        ({"central_solver": "lu"}, "central-solver"),
        ({"log_every": -1}, "--log-every"),
    ],
)
def test_validation(kwargs, fragment):
    with pytest.raises(UserError, match=fragment):
        TrainConfig(**kwargs).validate(world_size=4)


@pytest.mark.parametrize("mode", MODES)
def test_one_sided_options_only_where_the_driver_uses_them(mode):
    alg = lookup(mode)
    ranks = 1 if alg.max_ranks == 1 else 4
    TrainConfig(mode=mode, max_lead=4, rma="auto").validate(world_size=ranks)  # the defaults
    for kwargs in ({"max_lead": 0}, {"max_lead": None}, {"rma": "put"}):
        cfg = TrainConfig(mode=mode, **kwargs)
        if alg.one_sided:
            cfg.validate(world_size=ranks)
        else:
            flag = "--max-lead" if "max_lead" in kwargs else "--rma"
            with pytest.raises(UserError, match=f"^{flag} applies to the one-sided modes "
                               rf"\(async, hood\), not --mode {mode},"):
                cfg.validate(world_size=ranks)


def test_stop_rule_is_the_parsed_stop_setting():
    cfg = TrainConfig(**config_from_mapping({"stop": "EPS:1e-2"}, "test"))
    assert cfg.stop == "eps:0.01" and cfg.stop_rule == StopRule("eps", 1e-2)
    assert TrainConfig().stop_rule.fixed
    with pytest.raises(UserError, match="^--stop 'bogus': choose iters"):
        TrainConfig(stop="bogus").validate(world_size=4)


def test_width_and_bound_default_to_the_papers_from_the_classes():
    assert TrainConfig().width_and_bound(10) == (2 * 10 + 1000, 2.0 * 10)
    assert TrainConfig(hidden=50, norm_bound=3.0).width_and_bound(10) == (50, 3.0)
    with pytest.raises(UserError, match=r"^--hidden 20 must exceed 2Q = 20 \(Q = 10 classes\)"):
        TrainConfig(hidden=20).width_and_bound(10)


def test_mode_help_names_every_mode_and_the_default():
    text = TrainConfig.__dataclass_fields__["mode"].metadata["option"].help()
    assert text.startswith(f"{MODES[0]} (default)") and TrainConfig().mode == MODES[0]
    assert all(mode in text for mode in MODES)


def test_config_mapping_round_trip_and_errors():
    cfg = TrainConfig(gamma=(1.0, 0.2), slow={1: 3.0}, fail_at=(0, 1, "kill"))
    back = TrainConfig(**config_from_mapping(cfg.to_dict(), "test"))
    assert back == cfg
    with pytest.raises(UserError, match="unknown key"):
        config_from_mapping({"gama": 1}, "test")
    with pytest.raises(UserError, match="wrong type"):
        config_from_mapping({"layers": 2.5}, "test")


# --------------------------------------------------------------------------- config files

TOML = """\
dataset = "satimage"  # a comment
layers = 3
eta = 0.9
gamma = [10, 0.5]

[dataset_options]
verify = false
"""
SAME_AS_JSON = {"dataset": "satimage", "layers": 3, "eta": 0.9, "gamma": [10, 0.5],
                "dataset_options": {"verify": False}}


def _real_toml_parser():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11: the dependency of pyproject.toml
        tomllib = pytest.importorskip("tomli")
    return tomllib


def test_toml_and_json_config_files_agree(tmp_path):
    (tmp_path / "c.toml").write_text(TOML, encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps(SAME_AS_JSON))
    from_toml = load_config_file(tmp_path / "c.toml")
    assert from_toml == load_config_file(tmp_path / "c.json")
    assert from_toml["layers"] == 3 and from_toml["dataset_options"] == {"verify": False}


def test_toml_falls_back_to_tomli_before_python_3_11(tmp_path, monkeypatch):
    # Python < 3.11 as the loader sees it: no tomllib, and tomli (the same parser) installed.
    real = _real_toml_parser()
    used = []
    tomli = types.ModuleType("tomli")
    tomli.loads = lambda text: used.append(text) or real.loads(text)
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", tomli)
    (tmp_path / "c.toml").write_text(TOML, encoding="utf-8")
    assert load_config_file(tmp_path / "c.toml")["eta"] == 0.9
    assert used == [TOML]
    # Neither installed (dependencies skipped): one line that says what to do.
    monkeypatch.setitem(sys.modules, "tomli", None)
    with pytest.raises(UserError, match="needs the tomli package .* or use a .json file"):
        load_config_file(tmp_path / "c.toml")


@pytest.mark.parametrize("name, text", [
    ("bad.toml", "layers = = 3\n"),
    ("bad.json", "{layers: 3}"),
    ("latin1.toml", b'dataset = "caf\xe9"\n'),
])
def test_unparsable_config_file_is_a_user_error(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(UserError, match=f"--config {path}: cannot parse it"):
        load_config_file(path)


def test_every_claimed_python_reads_toml_and_the_license_matches():
    meta = _real_toml_parser().loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    project = meta["project"]
    # requires-python reaches below 3.11, so tomli must be a dependency there (and only there).
    assert project["requires-python"] == ">=3.9"
    assert 'tomli>=1.1; python_version < "3.11"' in project["dependencies"]
    assert meta["tool"]["ruff"]["target-version"] == "py39"
    # The declared license is the one in LICENSE.
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the dssfn_mpi authors\n")
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
