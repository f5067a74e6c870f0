"""Tests for dssfn_mpi.waiting.sleep_until: backoff bounds, timeout, no busy spin."""

from __future__ import annotations

import time

import pytest

from dssfn_mpi import waiting
from dssfn_mpi.waiting import BACKOFF_MAX, BACKOFF_MIN, Waited, sleep_until


class Poll:
    """A readiness test that becomes true on call number ``true_at`` (never if None)."""

    def __init__(self, true_at: int | None) -> None:
        self.true_at = true_at
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.true_at is not None and self.calls >= self.true_at


def record_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Replace time.sleep in the module by a fake clock advance; return the delays."""
    now = [0.0]
    delays: list[float] = []

    def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(waiting.time, "sleep", fake_sleep)
    monkeypatch.setattr(waiting.time, "perf_counter", lambda: now[0])
    return delays


def test_ready_at_once_is_no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    delays = record_sleeps(monkeypatch)
    poll = Poll(1)
    result = sleep_until(poll, 10.0)
    assert result == Waited(True, 0.0) and result.ready and result.seconds == 0.0
    assert poll.calls == 1 and delays == []


def test_backoff_doubles_from_the_minimum_up_to_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    delays = record_sleeps(monkeypatch)
    poll = Poll(12)
    ready, waited = sleep_until(poll, 10.0, max_delay=2e-3)
    assert ready and poll.calls == 12 and len(delays) == 11
    expected = [min(BACKOFF_MIN * 2**i, 2e-3) for i in range(11)]
    assert delays == pytest.approx(expected)
    assert waited == pytest.approx(sum(expected))


def test_default_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    delays = record_sleeps(monkeypatch)
    sleep_until(Poll(30), 100.0)
    assert max(delays) == pytest.approx(BACKOFF_MAX) == pytest.approx(10e-3)


def test_timeout_returns_false_and_never_oversleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    delays = record_sleeps(monkeypatch)
    poll = Poll(None)
    ready, waited = sleep_until(poll, 0.1, max_delay=0.05)
    assert not ready
    assert waited == pytest.approx(0.1)  # the last sleep is cut to the timeout
    assert poll.calls == len(delays) + 1  # one poll after the last sleep


def test_ready_exactly_at_the_timeout_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    record_sleeps(monkeypatch)
    probe = Poll(None)
    sleep_until(probe, 0.1)
    poll = Poll(probe.calls)  # true only on the poll made at the timeout
    ready, waited = sleep_until(poll, 0.1)
    assert ready and waited == pytest.approx(0.1)


def test_zero_timeout_polls_once(monkeypatch: pytest.MonkeyPatch) -> None:
    delays = record_sleeps(monkeypatch)
    poll = Poll(None)
    assert sleep_until(poll, 0.0) == Waited(False, 0.0)
    assert poll.calls == 1 and delays == []


def test_real_wait_sleeps_instead_of_spinning() -> None:
    poll = Poll(None)
    cpu0, t0 = time.process_time(), time.perf_counter()
    ready, waited = sleep_until(poll, 0.3)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    assert not ready and 0.3 <= waited <= wall
    # A spin would poll millions of times and burn the whole 0.3 s of CPU.
    assert poll.calls < 0.3 / BACKOFF_MAX + 20
    assert cpu < 0.1, cpu


def test_becomes_ready_from_another_thread() -> None:
    import threading

    flag = threading.Event()
    timer = threading.Timer(0.05, flag.set)
    timer.start()
    try:
        ready, waited = sleep_until(flag.is_set, 5.0)
    finally:
        timer.cancel()
    assert ready and 0.04 <= waited < 1.0
