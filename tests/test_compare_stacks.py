"""tests/compare_stacks.py, the portability matrix's verdict, can fail (no MPI needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from compare_stacks import main

from dssfn_mpi.runlog import write_runlog


def _run(path, library="MPICH Version: 5.0.2", osc="MPICH ch4:ucx ofi", rel=1e-7,
         passive="passive", iters=1000, reason=1) -> str:
    config = json.dumps({"iters": iters, "out": str(path)})
    attrs = {"layers": 1, "complete": True, "config": config,
             "mpi_library": library, "mpi_osc": osc, "mpi_passive_put": passive}
    write_runlog(path, attrs, {"rel_distance": np.full((2, 4), rel),
                               "stop_reason": np.full((2, 4), reason, dtype=np.int64)})
    return str(path)


def test_agreeing_stacks_pass(tmp_path, capsys):
    a = _run(tmp_path / "a.h5", library="Open MPI v5.0.11", osc="sm", rel=2e-6)
    b = _run(tmp_path / "b.h5")
    assert main([f"{a}:Open MPI:sm", f"{b}:MPICH"]) == 0
    assert "max rel distances 2.000e-06, 1.000e-07" in capsys.readouterr().out


@pytest.mark.parametrize("change, expected", [
    ({"rel": 3e-3}, "max rel distance 3.000e-03 > 0.0001"),
    ({"rel": np.nan}, "max rel distance nan"),
    ({"passive": "not passive"}, "passive put 'not passive'"),
    ({"library": "Open MPI v5"}, "is not 'MPICH'"),
    ({"iters": 10}, "configs differ"),
    ({"reason": 3}, "layers did not end by the eps rule"),
])
def test_a_disagreeing_stack_fails(tmp_path, capsys, change, expected):
    good = _run(tmp_path / "good.h5")
    bad = _run(tmp_path / "bad.h5", **change)
    assert main([f"{good}:MPICH", f"{bad}:MPICH"]) == 1
    assert expected in capsys.readouterr().out


def test_the_expected_component_is_checked(tmp_path, capsys):
    run = _run(tmp_path / "a.h5", library="Open MPI v5", osc="rdma")
    assert main([f"{run}:Open MPI:sm"]) == 1
    assert "one-sided component 'rdma' is not 'sm'" in capsys.readouterr().out
