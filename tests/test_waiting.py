"""Tests for dssfn_mpi.mailbox.waiting: sleep_until (backoff bounds, timeout, no busy spin) and the
wait policies of --wait (spin, hybrid, auto)."""

from __future__ import annotations

import os
import time

import pytest

from dssfn_mpi.mailbox import waiting
from dssfn_mpi.mailbox.waiting import (
    AUTO_SPIN_MAX,
    BACKOFF_MAX,
    BACKOFF_MIN,
    CONTENDED_SPIN,
    POLICIES,
    PROGRESS_SLEEP,
    SPIN_BUDGET,
    LoadMonitor,
    NodeShare,
    Waited,
    WaitPolicy,
    make_policy,
    sleep_until,
)


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


# -- the wait policy (--wait) -------------------------------------------------------------


def fake_clock(monkeypatch: pytest.MonkeyPatch, tick: float = 1e-6) -> list[float]:
    """Every perf_counter call advances the clock by ``tick``; sleeps advance it too.

    Returns the sleeps made.
    """
    now = [0.0]
    delays: list[float] = []

    def perf_counter() -> float:
        now[0] += tick
        return now[0]

    def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(waiting.time, "sleep", fake_sleep)
    monkeypatch.setattr(waiting.time, "perf_counter", perf_counter)
    return delays


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_returns_at_once_when_ready(monkeypatch, name):
    delays = fake_clock(monkeypatch)
    policy = WaitPolicy(name, NodeShare(4, 2))
    poll = Poll(1)
    assert policy.wait(poll, 10.0) == Waited(True, 0.0)
    assert policy.wait_request(type("Req", (), {"Test": poll})(), 10.0) == Waited(True, 0.0)
    assert poll.calls == 2 and delays == [] and policy.waits == policy.slept == 0


def test_spin_polls_without_sleeping(monkeypatch):
    delays = fake_clock(monkeypatch)
    policy = WaitPolicy("spin")
    poll = Poll(5000)  # 5000 polls at 1 us a clock reading: ~5 ms, far past any budget
    ready, waited = policy.wait(poll, 10.0)
    assert ready and poll.calls == 5000 and delays == []
    assert waited > 0 and policy.waits == 1 and policy.slept == 0


def test_spin_gives_up_at_the_timeout(monkeypatch):
    delays = fake_clock(monkeypatch)
    ready, waited = WaitPolicy("spin").wait(Poll(None), 0.01)
    assert not ready and waited == pytest.approx(0.01, abs=1e-5) and delays == []


def test_hybrid_spins_its_budget_then_sleeps_with_backoff(monkeypatch):
    delays = fake_clock(monkeypatch, tick=1e-6)
    policy = WaitPolicy("hybrid")
    poll = Poll(200)
    assert policy.wait(poll, 10.0, max_delay=2e-3).ready
    # About one poll per microsecond for SPIN_BUDGET, then doubling sleeps.
    spun = poll.calls - 1 - len(delays)
    assert SPIN_BUDGET * 1e6 * 0.4 <= spun <= SPIN_BUDGET * 1e6 + 2
    assert delays[:3] == pytest.approx([BACKOFF_MIN, 2 * BACKOFF_MIN, 4 * BACKOFF_MIN])
    assert max(delays) == pytest.approx(2e-3)
    assert policy.waits == 1 and policy.slept == 1


def test_progress_waits_never_sleep_longer_than_the_shortest_sleep(monkeypatch):
    delays = fake_clock(monkeypatch)
    for name in ("hybrid", "auto"):
        WaitPolicy(name, NodeShare(4, 2)).wait(Poll(300), 10.0, progress=True)
    assert delays and max(delays) <= PROGRESS_SLEEP


def test_hybrid_gives_up_at_the_timeout_without_oversleeping(monkeypatch):
    delays = fake_clock(monkeypatch)
    ready, waited = WaitPolicy("hybrid").wait(Poll(None), 0.1, max_delay=0.05)
    assert not ready and waited == pytest.approx(0.1, abs=1e-4)
    assert sum(delays) <= 0.1


class Monitor:
    """A load monitor that says what the test wants."""

    available = True

    def __init__(self, contended: bool) -> None:
        self.answer = contended

    def contended(self) -> bool:
        return self.answer


def test_auto_resolves_from_the_ranks_per_core_where_load_cannot_be_read():
    assert WaitPolicy("auto", NodeShare(2, 2)).resolved == "spin"
    assert WaitPolicy("auto", NodeShare(1, 8)).resolved == "spin"
    shared = WaitPolicy("auto", NodeShare(4, 2))
    assert shared.resolved == "hybrid" and shared.monitor is None
    assert shared.resolution() == "hybrid (4 ranks on 2 cores)"
    assert WaitPolicy("spin", NodeShare(4, 2)).resolution() == "spin"
    assert make_policy("auto").share == NodeShare(1, 1)  # no communicator: a core per rank
    with pytest.raises(ValueError, match="unknown wait policy"):
        WaitPolicy("yield")


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_auto_measures_the_load_where_it_can():
    share = NodeShare(1, 1, (os.getpid(),), (min(os.sched_getaffinity(0)),))
    policy = WaitPolicy("auto", share)
    assert policy.resolved == "measured" and policy.monitor is not None
    assert policy.resolution() == "measured (1 ranks on 1 cores)"


def test_load_monitor_counts_what_the_ranks_did_not_use(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(waiting.time, "perf_counter", lambda: clock[0])
    readings = iter([(0.0, 0, 0), (1.0, 200, 190), (2.0, 400, 290), (3.0, 600, 490)])
    monkeypatch.setattr(LoadMonitor, "_reading", lambda self: next(readings))
    monitor = LoadMonitor([1, 2, 3, 4], [0, 1], interval=1.0)
    monitor._hz = 100
    assert monitor.available and not monitor.contended()  # no complete window yet
    clock[0] = 1.0
    assert not monitor.contended() and monitor.foreign == pytest.approx(0.1)  # 0.1 core
    clock[0] = 2.0
    assert monitor.contended() and monitor.foreign == pytest.approx(1.0)  # a busy process
    clock[0] = 2.5
    assert monitor.contended()  # the last complete window counts until the next one
    clock[0] = 3.0
    assert not monitor.contended() and monitor.foreign == pytest.approx(0.0)


def test_load_monitor_ignores_foreign_load_on_free_cores(monkeypatch):
    readings = iter([(0.0, 0, 0), (1.0, 300, 200)])
    monkeypatch.setattr(LoadMonitor, "_reading", lambda self: next(readings))
    monitor = LoadMonitor([1, 2], list(range(8)), interval=0.0)
    monitor._hz = 100
    assert not monitor.contended() and monitor.foreign == pytest.approx(1.0)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_load_monitor_reads_this_machine():
    cores = sorted(os.sched_getaffinity(0))
    monitor = LoadMonitor([os.getpid()], cores, interval=0.05)
    assert monitor.available
    t_end = time.perf_counter() + 0.12
    while time.perf_counter() < t_end:  # this process is busy: its own load is not foreign
        pass
    monitor.contended()
    assert 0.0 <= monitor.foreign <= len(cores)
    assert waiting._process_ticks(2**22 + 12345) == 0  # a process that is gone


def test_auto_spins_when_nothing_competes_and_spins_less_then_sleeps_when_something_does(
        monkeypatch):
    delays = fake_clock(monkeypatch)
    policy = WaitPolicy("auto", NodeShare(4, 2), Monitor(False))
    assert policy.resolved == "measured"
    assert policy.wait(Poll(2000), 10.0, progress=True).ready  # ~2 ms: spun through
    assert delays == [] and policy.slept == 0
    policy.monitor = Monitor(True)
    poll = Poll(5000)
    assert policy.wait(poll, 10.0, progress=True).ready
    assert policy.slept == 1 and max(delays) <= PROGRESS_SLEEP
    spun = poll.calls - 1 - len(delays)
    assert CONTENDED_SPIN * 1e6 * 0.4 <= spun <= CONTENDED_SPIN * 1e6 + 2  # the contended spin


def test_auto_without_a_load_reading_takes_oversubscription_for_contention(monkeypatch):
    delays = fake_clock(monkeypatch)
    poll = Poll(5000)
    assert WaitPolicy("auto", NodeShare(4, 2)).wait(poll, 10.0, progress=True).ready
    assert delays and poll.calls - 1 - len(delays) <= CONTENDED_SPIN * 1e6 + 2
    delays.clear()
    assert WaitPolicy("auto", NodeShare(2, 2)).wait(Poll(2000), 10.0, progress=True).ready
    assert delays == []


def test_auto_stops_spinning_after_its_longest_spin(monkeypatch):
    delays = fake_clock(monkeypatch)
    policy = WaitPolicy("auto", NodeShare(2, 2), Monitor(False))
    poll = Poll(int(3 * AUTO_SPIN_MAX * 1e6))
    assert policy.wait(poll, 10.0, progress=True).ready
    assert policy.slept == 1 and delays
    assert poll.calls - 1 - len(delays) == pytest.approx(AUTO_SPIN_MAX * 1e6, rel=0.01)


def test_auto_shared_one_sided_waits_sleep_at_once(monkeypatch):
    # More ranks than cores: the async engine's waits must not spin, whatever the load.
    delays = fake_clock(monkeypatch)
    for monitor in (None, Monitor(False)):
        delays.clear()
        policy = WaitPolicy("auto", NodeShare(4, 2), monitor)
        poll = Poll(4)
        assert policy.wait(poll, 10.0, max_delay=2e-3).ready
        assert poll.calls == 4 and len(delays) == 3  # the first poll, then one after each sleep
        assert policy.slept == 1


def test_auto_dedicated_one_sided_waits_spin(monkeypatch):
    delays = fake_clock(monkeypatch)
    policy = WaitPolicy("auto", NodeShare(2, 2), Monitor(False))
    for _ in range(20):
        assert policy.wait(Poll(50), 10.0, max_delay=2e-3).ready  # ~50 us each
    assert delays == [] and policy.waits == 20 and policy.slept == 0


def test_auto_one_sided_wait_sleeps_for_real_when_oversubscribed() -> None:
    # The async engine's no-busy-spin promise under auto with more ranks than cores.
    policy = WaitPolicy("auto", NodeShare(20, 2))
    poll = Poll(None)
    cpu0 = time.process_time()
    ready, waited = policy.wait(poll, 0.3, max_delay=BACKOFF_MAX)
    assert not ready and waited >= 0.3
    assert poll.calls < 0.3 / BACKOFF_MAX + 20
    assert time.process_time() - cpu0 < 0.1
