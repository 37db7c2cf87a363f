"""One simulated clock for the whole emulator.

Simulated time runs ``speed`` times faster than real time: Wait states, Retry intervals and
every service's status progression read it, so a six-hour training run passes in seconds while
reports still show simulated durations. It stands still while an in-process Lambda handler
runs (:meth:`SimulatedClock.paused`): a step that takes milliseconds on AWS must not cost
simulated minutes because this machine imports and runs it at its own pace.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta


class SimulatedClock:
    def __init__(self, speed: float = 1.0) -> None:
        self._lock = threading.Lock()
        self.reset(speed)

    def reset(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("the clock's speed must be positive")
        with self._lock:
            self.speed = float(speed)
            self._real0 = time.time()
            self._sim0 = datetime.fromtimestamp(self._real0, UTC)
            self._pauses: list[tuple[float, float]] = []  # finished (start, end), real time
            self._paused_total = 0.0
            self._depth = 0
            self._paused_at = 0.0

    def _paused_before(self, real: float) -> float:
        if real >= time.time():  # the present: every pause so far
            done = self._paused_total
        else:
            done = sum(min(end, real) - start for start, end in self._pauses if start < real)
        ongoing = max(0.0, real - self._paused_at) if self._depth else 0.0
        return done + ongoing

    def _at(self, real: float) -> datetime:
        running = real - self._real0 - self._paused_before(real)
        return self._sim0 + timedelta(seconds=running * self.speed)

    def now(self) -> datetime:
        with self._lock:
            return self._at(time.time())

    def simulated_at(self, real_timestamp: float) -> datetime:
        """The simulated time of a past real instant (e.g. when moto stamped an event)."""
        with self._lock:
            return self._at(real_timestamp)

    def timestamp(self) -> float:
        return self.now().timestamp()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._paused_at = time.time()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    end = time.time()
                    self._pauses.append((self._paused_at, end))
                    self._paused_total += end - self._paused_at

    def real_seconds(self, simulated_seconds: float) -> float:
        return max(0.0, simulated_seconds) / self.speed

    def sleep(self, simulated_seconds: float) -> None:
        time.sleep(self.real_seconds(simulated_seconds))

    def simulated_seconds(self, real_start: datetime, real_end: datetime) -> float:
        """Simulated length of a real interval (Step Functions stamps executions in real time)."""
        with self._lock:
            start, end = self._at(real_start.timestamp()), self._at(real_end.timestamp())
        return (end - start).total_seconds()


CLOCK = SimulatedClock()
