"""The simulated clock skips ahead only when every thread waits for it, only as far as the
earliest wait (or alarm) ends, and keeps the simulated time of every past instant."""

from __future__ import annotations

import threading
import time

from traingrid_local.emulator.clock import SimulatedClock


def _waiting(clock: SimulatedClock, seconds: float) -> tuple[threading.Thread, list[float]]:
    """A thread that holds the clock, as a state machine does, and waits ``seconds`` on it;
    the real seconds its wait took, once it has ended."""
    took: list[float] = []

    def run() -> None:
        with clock.paused():
            started = time.monotonic()
            clock.wait(seconds)
            took.append(time.monotonic() - started)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not clock._deadlines and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.005)
    return thread, took


def test_nothing_is_skipped_without_a_waiter_or_while_the_clock_is_held() -> None:
    clock = SimulatedClock(speed=1)
    assert clock.fast_forward(idle_s=0) == 0
    with clock.paused():
        thread, took = _waiting(clock, 3600)
        assert clock.fast_forward(idle_s=0) == 0  # this thread still works
    assert clock.fast_forward(idle_s=60) == 0  # not idle long enough
    assert clock.fast_forward(idle_s=0) > 3500
    thread.join(5)
    assert took and took[0] < 2


def test_a_skip_ends_at_the_earliest_wait_and_keeps_the_past() -> None:
    clock = SimulatedClock(speed=1)
    before = time.time()
    at_before = clock.simulated_at(before)
    start = clock.now()
    short, short_took = _waiting(clock, 600)
    long, long_took = _waiting(clock, 7200)
    skipped = clock.fast_forward(idle_s=0)
    assert 500 < skipped <= 600
    short.join(5)
    assert short_took and short_took[0] < 2
    assert not long_took  # its wait is 7200 simulated seconds; 600 have passed
    assert clock.simulated_at(before) == at_before
    assert 600 <= (clock.now() - start).total_seconds() < 610
    assert clock.fast_forward(idle_s=0) > 6000
    long.join(5)
    assert long_took and long_took[0] < 2


def test_a_skip_stops_at_an_alarm() -> None:
    clock = SimulatedClock(speed=1)
    thread, _ = _waiting(clock, 7200)
    alarm = clock.timestamp() + 120
    skipped = clock.fast_forward([alarm, None], idle_s=0)
    assert 100 < skipped <= 120
    assert clock.timestamp() >= alarm
    clock.fast_forward(idle_s=0)
    thread.join(5)
