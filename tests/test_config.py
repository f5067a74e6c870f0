"""Settings: parsing, presets and validation (no MPI)."""

import pytest

from dssfn_mpi.config import (
    PAPER_TABLE3,
    TrainConfig,
    apply_preset,
    config_from_mapping,
    parse_fail_at,
    parse_per_layer,
    parse_slow,
)
from dssfn_mpi.errors import UserError


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


def test_config_mapping_round_trip_and_errors():
    cfg = TrainConfig(gamma=(1.0, 0.2), slow={1: 3.0}, fail_at=(0, 1, "kill"))
    back = TrainConfig(**config_from_mapping(cfg.to_dict(), "test"))
    assert back == cfg
    with pytest.raises(UserError, match="unknown key"):
        config_from_mapping({"gama": 1}, "test")
    with pytest.raises(UserError, match="wrong type"):
        config_from_mapping({"layers": 2.5}, "test")
