"""The async engine's waits under mpirun: a silent neighbour ends the job with one line."""

from __future__ import annotations

import time

import pytest
from mpitools import run_cli

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(180)]


def test_async_bounded_delay_gives_up_after_timeout(tmp_path):
    # Rank 1 sleeps ~1e6 times each activation's length before its first put, so
    # rank 0 runs max_lead activations ahead and then waits for it in vain.
    out = tmp_path / "run.h5"
    started = time.monotonic()
    res = run_cli(2, "train", "--dataset", "synthetic", "--layers", "1", "--hidden", "30",
                  "--iters", "50", "--mode", "async", "--topology", "complete",
                  "--slow", "1:1000000", "--timeout", "2", "--out", str(out), timeout=150)
    elapsed = time.monotonic() - started
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr, res.stderr
    ours = [ln for ln in res.stderr.splitlines() if ln.startswith("dssfn-mpi: error:")]
    assert ours == [
        "dssfn-mpi: error: rank 0: layer 0: neighbours wrote nothing for 2 s "
        "(a rank died or hangs; see --timeout)"
    ], res.stderr
    assert elapsed < 60, elapsed  # the wait ended at the timeout, not with rank 1's sleep
    assert not out.exists()
