"""The driver kinds are one table: every algorithm's driver is registered, every driver's
implementations resolve, and a driver kind added from outside the package runs."""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest

from dssfn_mpi.algorithms import ALGORITHMS, lookup
from dssfn_mpi.cli import main
from dssfn_mpi.drivers import CONSENSUS, DRIVERS, Driver, Penalty, register_driver
from dssfn_mpi.engines.base import Engine
from dssfn_mpi.runlog import read_runlog


def test_every_algorithm_runs_on_a_registered_driver():
    assert {a.driver.name for a in ALGORITHMS} == {d.name for d in DRIVERS}
    assert all(a.driver in DRIVERS for a in ALGORITHMS)


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
def test_every_driver_names_implementations_that_exist(driver):
    averagings = {a.averaging for a in ALGORITHMS if a.driver is driver}
    for averaging in averagings:
        assert issubclass(driver.implementation("live", averaging), Engine)
        if not driver.decentralized:
            continue
        for what, prefix in (("simulated", "simulate_"), ("replayed", "replay_")):
            assert driver.implementation(what, averaging).__name__.startswith(prefix)
        assert len(inspect.signature(driver.implementation("simulated", averaging))
                   .parameters) == 9  # run, layer, invs, B2s, pens, metrics, target, ...


def test_a_driver_without_a_form_says_so():
    central = lookup("central").driver
    with pytest.raises(NotImplementedError, match="central has no simulated form"):
        central.implementation("simulated")


def test_the_penalty_decision_is_one_rule():
    for alg in ALGORITHMS:
        d = alg.driver
        if alg.direct:
            assert {d.penalty_source(f, m) for f in (None, 1.0) for m in (False, True)} \
                == {Penalty.NONE}
            continue
        assert d.penalty_source(2.0, True) is Penalty.FIXED  # a set value wins
        assert d.penalty_source(None, True) is Penalty.METRIC
        assert d.penalty_source(None, False) is Penalty.AUTO


@pytest.fixture
def counting_kind():
    """A driver kind from outside the package: consensus's forms, counting the simulated
    layers it runs; one algorithm on it. Both are removed after the test."""
    calls = []

    def simulated(run, layer, *args):
        calls.append(layer)
        return CONSENSUS.implementation("simulated")(run, layer, *args)

    kind = register_driver(Driver(
        "counting", live={"allreduce": "dssfn_mpi.engines.sync_allreduce:SyncAllreduceEngine"},
        simulated=simulated, replayed={"allreduce": "dssfn_mpi.analysis.replayrules:"
                                                    "replay_allreduce"}))
    alg = copy.copy(lookup("sync"))
    alg.name, alg.driver = "counting-sync", kind
    ALGORITHMS.append(alg)
    try:
        yield calls
    finally:
        ALGORITHMS.remove(alg)
        DRIVERS.remove(kind)


def test_a_driver_kind_added_outside_the_package_runs(counting_kind, tmp_path):
    out = tmp_path / "sim.h5"
    assert main(["simulate", "--mode", "counting-sync", "--nodes", "4", "--dataset", "digits",
                 "--layers", "1", "--hidden", "60", "--iters", "300", "--quiet",
                 "--out", str(out)]) == 0
    assert counting_kind == [0, 1]  # its simulated form ran every layer
    rel = read_runlog(out).layers["rel_distance"]
    assert rel.shape == (2, 4) and np.all(rel <= 1e-6), rel
