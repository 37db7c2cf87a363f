"""One simulated clock for the whole emulator.

Simulated time runs ``speed`` times faster than real time: Wait states, Retry intervals and
every service's status progression read it, so a six-hour training run passes in seconds while
reports still show simulated durations.
"""

from __future__ import annotations

import threading
import time
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
            self._real0 = time.monotonic()
            self._sim0 = datetime.now(UTC)

    def now(self) -> datetime:
        with self._lock:
            return self._sim0 + timedelta(seconds=(time.monotonic() - self._real0) * self.speed)

    def timestamp(self) -> float:
        return self.now().timestamp()

    def real_seconds(self, simulated_seconds: float) -> float:
        return max(0.0, simulated_seconds) / self.speed

    def sleep(self, simulated_seconds: float) -> None:
        time.sleep(self.real_seconds(simulated_seconds))

    def simulated_seconds(self, real_start: datetime, real_end: datetime) -> float:
        """Simulated length of a real interval (Step Functions stamps executions in real time)."""
        return (real_end - real_start).total_seconds() * self.speed


CLOCK = SimulatedClock()
