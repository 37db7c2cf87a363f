"""Things that happen at a simulated time, on their own: a service's state changes that AWS
announces with an event whether or not anyone is looking.

One daemon thread runs every due alarm in time order, holding the clock while it acts (the
event deliveries an alarm sets off take no simulated time). The clock knows the next alarm's
time and stops there until the alarm is taken, so an alarm acts at its own simulated moment
however late this machine runs the thread. The emulator session clears the
alarms when it starts and ends, so none outlives the account it belongs to.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from datetime import datetime

from traingrid_local.emulator.clock import CLOCK

log = logging.getLogger(__name__)
# How long the thread naps with nothing due (it is woken when an alarm is set).
_IDLE_S = 0.5
_LOOK_AGAIN_S = 0.05


class Alarms:
    def __init__(self) -> None:
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def at(self, when: datetime, action: Callable[[], None]) -> None:
        with self._changed:
            heapq.heappush(self._due, (when.timestamp(), next(self._order), action))
            CLOCK.set_alarm_due(self._due[0][0])
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="emulator-alarms",
                                                daemon=True)
                self._thread.start()
            self._changed.notify()

    def clear(self) -> None:
        with self._changed:
            self._due.clear()
            CLOCK.set_alarm_due(None)
            self._changed.notify()

    def pending(self) -> int:
        with self._changed:
            return len(self._due)

    def next_due(self) -> float | None:
        """When the next alarm is due (a simulated timestamp), or None: how far the clock may
        skip ahead (``SimulatedClock.fast_forward``)."""
        with self._changed:
            return self._due[0][0] if self._due else None

    def wake(self) -> None:
        """Look at the clock now (it may have skipped to an alarm's time)."""
        with self._changed:
            self._changed.notify()

    def _next_due(self) -> tuple[Callable[[], None], int]:
        """The next alarm once it is due, and the hold on the clock taken as it was taken off
        the list (the clock must not skip past an alarm between the two)."""
        with self._changed:
            while True:
                if not self._due:
                    self._changed.wait(_IDLE_S)
                    continue
                remaining = CLOCK.remaining(self._due[0][0])
                if remaining <= 0:
                    action = heapq.heappop(self._due)[2]
                    held = CLOCK.hold_for_another()  # before the alarm's stop is let go
                    CLOCK.set_alarm_due(self._due[0][0] if self._due else None)
                    return action, held
                self._changed.wait(min(CLOCK.real_seconds(remaining), _LOOK_AGAIN_S))

    def _run(self) -> None:
        while True:
            action, held = self._next_due()
            try:
                with CLOCK.paused():  # what an alarm sets off takes no simulated time
                    CLOCK.let_go_for_another(held)
                    action()
            except Exception:  # noqa: BLE001 - one failing alarm must not stop the others
                log.exception("emulator alarm failed")


ALARMS = Alarms()
