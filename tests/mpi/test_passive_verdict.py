"""The run log's passive-put verdict is certain or says undecided (dssfn_mpi.mailbox.rmacheck).

A loaded machine delays the origin's put; that must never read as "not passive". Each
case slows the check's put (rmacheck._put) as load would, on the origin only.
"""

from __future__ import annotations

import time

import pytest
from mpi4py import MPI

from dssfn_mpi.mailbox import rmacheck


def _comm():
    return MPI.COMM_WORLD


@pytest.fixture
def slow_put(monkeypatch):
    """Make the origin's put + flush take ``delay`` s more: asleep (descheduled) or busy
    (``delay`` s of its own CPU time, so a loaded machine stretches it but cannot turn
    it into a descheduled wait)."""
    real = rmacheck._put

    def install(delay: float, busy: bool) -> None:
        def put(win, payload):
            if busy:  # running, as a put that polls for its target's progress
                end = time.thread_time() + delay
                while time.thread_time() < end:
                    pass
            else:
                time.sleep(delay)
            real(win, payload)

        monkeypatch.setattr(rmacheck, "_put", put)

    return install


@pytest.mark.mpi(min_size=2)
def test_a_passive_put_is_decided_at_once():
    r = rmacheck.passive_verdict(_comm(), sleep=0.05)
    assert r == {**r, "verdict": "passive", "attempts": 1, "error": ""}, r


@pytest.mark.mpi(min_size=2)
def test_a_put_slowed_by_load_is_still_passive(slow_put):
    """30 ms of a 50 ms sleep: the former rule (put within a quarter of the sleep) said
    'not passive'; the data was there when the target woke."""
    slow_put(0.03, busy=False)
    r = rmacheck.passive_verdict(_comm(), sleep=0.05)
    assert r["verdict"] == "passive" and r["put_seconds"] > 0.0125, r


@pytest.mark.mpi(min_size=2)
def test_an_origin_that_never_ran_in_time_is_undecided_not_failed(slow_put):
    slow_put(0.3, busy=False)  # descheduled past every sleep (0.05 s, 0.2 s)
    r = rmacheck.passive_verdict(_comm(), sleep=0.05, longest=0.2)
    assert r["verdict"] == rmacheck.UNDECIDED and r["attempts"] == 2, r


@pytest.mark.mpi(min_size=2)
def test_a_put_that_waits_running_for_its_target_is_not_passive(slow_put):
    """The signature of a put that needs its target: the origin busy in it past the
    target's wake-up, the data absent when the target woke."""
    slow_put(0.08, busy=True)
    r = rmacheck.passive_verdict(_comm(), sleep=0.05, longest=0.05)
    assert r["verdict"] == "not passive" and r["attempts"] == 1, r


@pytest.mark.mpi(min_size=2)
def test_a_late_origin_is_decided_by_a_longer_attempt(slow_put):
    """An origin too late for the first sleep: the next, longer one decides.

    Only a target that overslept its 50 ms (a loaded machine) can see the late put at the
    first attempt; then the first attempt decides, and rightly."""
    slow_put(0.06, busy=False)  # misses the 50 ms sleep, fits in the 200 ms one
    r = rmacheck.passive_verdict(_comm(), sleep=0.05, longest=1.0)
    assert r["verdict"] == "passive", r
    assert r["attempts"] == 2 or (r["attempts"] == 1 and r["sleep_seconds"] > 0.055), r
