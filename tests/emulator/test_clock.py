"""The simulated clock: simulated time runs ``speed`` times faster than real time, and stands
still while it is paused."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

import traingrid.clock
from traingrid_local.emulator import clock
from traingrid_local.emulator.clock import CLOCK, SimulatedClock
from traingrid_local.emulator.session import Emulator


class FakeTime:
    """Stands in for the ``time`` module the clock reads: real time that moves only by hand."""

    def __init__(self) -> None:
        self.now = time.time()
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(clock, "time", fake)
    return fake


def _seconds(delta: timedelta) -> float:
    return delta.total_seconds()


def test_simulated_time_starts_at_wall_time(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=1000)

    assert abs(_seconds(simulated.now() - datetime.now(UTC))) < 5
    assert simulated.now().tzinfo is not None


@pytest.mark.parametrize(("speed", "real", "expected"), [
    (1, 2.5, 2.5),
    (60, 2.5, 150.0),
    (2000, 0.25, 500.0),
    (0.5, 10.0, 5.0),
])
def test_now_advances_speed_times_faster_than_real_time(
    fake_time: FakeTime, speed: float, real: float, expected: float
) -> None:
    simulated = SimulatedClock(speed=speed)
    start, start_stamp = simulated.now(), simulated.timestamp()

    fake_time.advance(real)

    assert _seconds(simulated.now() - start) == pytest.approx(expected, abs=1e-3)
    assert simulated.timestamp() - start_stamp == pytest.approx(expected, abs=1e-3)


def test_sleep_waits_the_real_share_of_simulated_seconds(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=1800)
    start = simulated.now()

    simulated.sleep(3600)

    assert sum(fake_time.slept) == pytest.approx(2.0)
    assert _seconds(simulated.now() - start) == pytest.approx(3600, abs=1e-3)


def test_sleep_for_a_negative_duration_returns_at_once(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=10)

    simulated.sleep(-30)

    assert fake_time.slept == []
    assert simulated.real_seconds(-1) == 0.0
    assert simulated.real_seconds(25) == 2.5


def test_simulated_seconds_scales_a_real_interval(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=2000)
    start = fake_time.datetime()
    fake_time.advance(5)

    assert simulated.simulated_seconds(start, start + timedelta(seconds=1.5)) == pytest.approx(
        3000.0, abs=1e-2)
    assert simulated.simulated_seconds(start, start) == 0.0
    assert simulated.simulated_seconds(start, fake_time.datetime()) == pytest.approx(
        10_000.0, abs=1e-2)


@pytest.mark.parametrize("speed", [0, -1, -0.5])
def test_reset_rejects_a_speed_that_is_not_positive(speed: float) -> None:
    simulated = SimulatedClock(speed=5)

    with pytest.raises(ValueError, match="positive"):
        simulated.reset(speed)
    assert simulated.speed == 5.0
    with pytest.raises(ValueError, match="positive"):
        SimulatedClock(speed=speed)


def test_reset_changes_the_speed_and_restarts_from_wall_time(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=10)
    fake_time.advance(3600)
    # Ten simulated hours in one real hour: nine hours ahead of the wall clock.
    assert _seconds(simulated.now() - fake_time.datetime()) == pytest.approx(9 * 3600, abs=1e-2)

    simulated.reset(4)
    start = simulated.now()
    fake_time.advance(1)

    assert simulated.speed == 4.0
    assert abs(_seconds(start - fake_time.datetime())) < 2
    assert _seconds(simulated.now() - start) == pytest.approx(4, abs=1e-3)


def test_the_clock_stands_still_while_paused(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=100)
    start = simulated.now()

    with simulated.paused():
        fake_time.advance(10)
        assert _seconds(simulated.now() - start) == pytest.approx(0, abs=1e-3)
    fake_time.advance(1)

    assert _seconds(simulated.now() - start) == pytest.approx(100, abs=1e-3)


def test_nested_pauses_resume_when_the_outermost_ends(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=100)
    start = simulated.now()

    with simulated.paused():
        with simulated.paused():
            fake_time.advance(3)
        fake_time.advance(4)
        assert _seconds(simulated.now() - start) == pytest.approx(0, abs=1e-3)
    fake_time.advance(2)

    assert _seconds(simulated.now() - start) == pytest.approx(200, abs=1e-3)


def test_simulated_seconds_leave_out_the_pauses_inside_an_interval(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=10)
    start = fake_time.datetime()
    fake_time.advance(1)
    before_pause = fake_time.datetime()
    with simulated.paused():
        fake_time.advance(30)
        during = simulated.simulated_seconds(start, fake_time.datetime())
    fake_time.advance(2)
    end = fake_time.datetime()
    fake_time.advance(1)

    assert during == pytest.approx(10, abs=1e-3)
    assert simulated.simulated_seconds(start, before_pause) == pytest.approx(10, abs=1e-3)
    assert simulated.simulated_seconds(start, end) == pytest.approx(30, abs=1e-3)


def test_the_real_clock_runs_at_the_configured_speed() -> None:
    simulated = SimulatedClock(speed=1000)
    real_start, start = time.monotonic(), simulated.now()
    time.sleep(0.02)
    end, real_end = simulated.now(), time.monotonic()

    elapsed = _seconds(end - start)
    assert 19.0 <= elapsed <= (real_end - real_start) * 1000 + 1


def test_a_session_runs_the_shared_clock_at_its_speed() -> None:
    original_now = traingrid.clock.now

    with Emulator(speed=3600):
        assert CLOCK.speed == 3600.0
        # Everything TrainGrid stamps comes from the simulated clock during the session.
        assert traingrid.clock.now == CLOCK.now
        assert abs(_seconds(traingrid.clock.now() - datetime.now(UTC))) < 3600

    assert traingrid.clock.now is original_now


def test_a_thread_that_waits_lets_go_of_its_holds(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=100)
    start = simulated.now()

    with simulated.paused(), simulated.paused():
        assert simulated.holds() == 2
        with simulated.released():
            assert simulated.holds() == 0
            fake_time.advance(1)  # time passes while the holder waits
        fake_time.advance(5)  # and stands still again once it holds

    assert simulated.holds() == 0
    assert _seconds(simulated.now() - start) == pytest.approx(100, abs=1e-3)


def test_another_threads_hold_keeps_the_clock_still_while_this_one_waits() -> None:
    simulated = SimulatedClock(speed=1000)
    held, done = threading.Event(), threading.Event()

    def busy() -> None:
        with simulated.paused():
            held.set()
            done.wait(2)

    worker = threading.Thread(target=busy)
    worker.start()
    held.wait(2)
    start = simulated.now()
    time.sleep(0.05)
    still = _seconds(simulated.now() - start)
    done.set()
    worker.join()

    assert still == pytest.approx(0, abs=1e-3)


def test_wait_counts_simulated_seconds_and_can_be_woken() -> None:
    simulated = SimulatedClock(speed=10_000)
    start = simulated.now()

    assert simulated.wait(600) is False  # a simulated ten minutes: about 60 ms
    assert _seconds(simulated.now() - start) >= 600
    assert simulated.wait(3600, woken=lambda real_timeout: True) is True


def test_a_simulated_event_times_out_in_simulated_seconds(monkeypatch) -> None:
    monkeypatch.setattr(clock, "CLOCK", SimulatedClock(speed=10_000))
    event = clock.SimulatedEvent()
    start = clock.CLOCK.now()

    assert event.wait(1800) is False
    assert _seconds(clock.CLOCK.now() - start) >= 1800
    threading.Timer(0.01, event.set).start()
    assert event.wait(10 * 24 * 3600) is True


def test_past_instants_stay_exact_after_thousands_of_pauses(fake_time: FakeTime) -> None:
    simulated = SimulatedClock(speed=10)
    start = fake_time.datetime()
    marks = []
    for _ in range(5000):
        fake_time.advance(1)
        marks.append(fake_time.datetime())
        with simulated.paused():
            fake_time.advance(2)

    # Each real second outside a pause is ten simulated ones; the pauses count for nothing.
    assert simulated.simulated_seconds(start, marks[0]) == pytest.approx(10, abs=1e-3)
    assert simulated.simulated_seconds(start, marks[-1]) == pytest.approx(50_000, abs=1e-2)
    assert simulated.simulated_seconds(marks[99], marks[199]) == pytest.approx(1000, abs=1e-3)
