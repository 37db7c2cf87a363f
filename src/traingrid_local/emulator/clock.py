"""One simulated clock for the whole emulator.

Simulated time runs ``speed`` times faster than real time: Wait states, Retry intervals, task
timeouts and every service's status progression read it, so a six-hour training run passes in
seconds while reports still show simulated durations.

It stands still while any thread holds it (:meth:`SimulatedClock.paused`): an in-process Lambda
handler, or a state machine evaluating a state. A step that takes milliseconds on AWS must not
cost simulated minutes because this machine runs it at its own pace, at whatever speed. Threads
that wait for simulated time (a Wait state, a task timeout, a callback) let go of their hold
while they wait (:meth:`SimulatedClock.released`), so time moves exactly when every busy thread
is waiting for it — the way time passes for work that costs nothing on AWS.

It never runs past a moment something waits for before that something has seen it: a
waiter's deadline (:meth:`SimulatedClock.wait`) or the next alarm (:meth:`set_alarm_due`).
Reaching one, the clock stops there until the waiter has woken or the alarm has been taken,
however late this machine schedules either: a one-hour timeout ends at exactly one hour, on
an idle machine and on a busy one alike, at any speed.

When nothing holds it and threads wait for it, the clock may also skip ahead
(:meth:`SimulatedClock.fast_forward`, which ``traingrid demo`` calls as it follows its runs):
straight to the earliest moment a waiter (or an alarm) waits for, instead of letting real time
pass. Every simulated time and duration stays what it would have been; the wall time shrinks to
the work itself.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta

# Simulated seconds per real second of a session, unless it asks for another speed.
DEFAULT_SPEED = 2000.0
# The longest a waiter sleeps before looking again: holds come and go while it waits.
_LOOK_AGAIN_S = 0.05
# How long the clock must have gone unheld before it skips ahead: a thread woken a moment ago
# (a new execution's, say) takes its hold by then.
_IDLE_BEFORE_SKIP_S = 0.05
# A deadline this close (simulated seconds) counts as reached: timestamps are floats.
_REACHED_S = 1e-3


class SimulatedClock:
    def __init__(self, speed: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._held = threading.local()
        self.reset(speed)

    def reset(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("the clock's speed must be positive")
        with self._lock:
            self.speed = float(speed)
            self._real0 = time.time()
            self._sim0 = datetime.fromtimestamp(self._real0, UTC)
            # Finished pauses in real time, in order and disjoint, with running totals, so the
            # simulated time of any past instant is a binary search away.
            self._starts: list[float] = []
            self._ends: list[float] = []
            self._totals: list[float] = []  # paused seconds up to the end of each pause
            self._depth = 0
            self._paused_at = 0.0
            # Skips ahead (fast_forward), in real time, with running totals of simulated seconds.
            self._skipped_at: list[float] = []
            self._skipped: list[float] = []
            self._free_since = self._real0  # when the last hold ended
            # What each waiting thread waits for (simulated timestamps), by its wait's token,
            # and the waits a skip ended, held for until their thread runs again.
            self._deadlines: dict[object, float] = {}
            self._handed: set[object] = set()
            # The next alarm's time (alarms.Alarms says), and whether the clock stands at it
            # until the alarm is taken off the list.
            self._alarm_due: float | None = None
            self._alarm_held = False
            # No reading is earlier than the last one, nor than a barrier the clock stopped at
            # (the real instant it stopped maps back to within a float's rounding of it).
            self._floor = self._sim0
            # Threads of an earlier session (an execution stopped mid-wait) may let go later;
            # their holds belonged to that session and must not touch this one.
            self._generation = getattr(self, "_generation", 0) + 1

    def _paused_before(self, real: float) -> float:
        index = bisect.bisect_right(self._starts, real)
        done = 0.0
        if index:
            last = index - 1
            before = self._totals[last - 1] if last else 0.0
            done = before + min(self._ends[last], real) - self._starts[last]
        ongoing = max(0.0, real - self._paused_at) if self._depth else 0.0
        return done + ongoing

    def _skipped_before(self, real: float) -> float:
        index = bisect.bisect_right(self._skipped_at, real)
        return self._skipped[index - 1] if index else 0.0

    def _at(self, real: float) -> datetime:
        running = real - self._real0 - self._paused_before(real)
        return self._sim0 + timedelta(
            seconds=running * self.speed + self._skipped_before(real))

    def _stop_at_barrier(self, real: float) -> None:
        """If the clock has reached (or passed) the earliest deadline or alarm nobody has yet
        seen, hold it at that moment from the real instant it got there, until the waiters
        whose deadline it is have woken and the alarm has been taken. Called (lock held)
        before the clock is read, so no reading ever passes the barrier."""
        if self._depth:
            return  # held: it stands still
        pending = [d for token, d in self._deadlines.items() if token not in self._handed]
        if self._alarm_due is not None and not self._alarm_held:
            pending.append(self._alarm_due)
        if not pending:
            return
        barrier = min(pending)
        overshoot = self._at(real).timestamp() - barrier
        if overshoot <= 0:
            return
        # The real instant the clock reached the barrier; never before what was recorded last.
        reached = max(real - overshoot / self.speed, self._ends[-1] if self._ends else 0.0,
                      self._skipped_at[-1] if self._skipped_at else 0.0)
        self._paused_at = reached  # one hold per waiter and alarm, from then
        self._floor = max(self._floor, datetime.fromtimestamp(barrier, UTC))
        for token, deadline in self._deadlines.items():
            if deadline <= barrier and token not in self._handed:
                self._handed.add(token)
                self._depth += 1
        if self._alarm_due is not None and self._alarm_due <= barrier and not self._alarm_held:
            self._alarm_held = True
            self._depth += 1

    def set_alarm_due(self, due: float | None) -> None:
        """The next alarm's simulated time (None: no alarm), as the alarms change; an alarm
        taken off the list lets go of the clock it stopped."""
        with self._lock:
            self._stop_at_barrier(time.time())
            if self._alarm_held and (due is None or due != self._alarm_due):
                self._alarm_held = False
                self._remove_hold()
            self._alarm_due = due

    def now(self) -> datetime:
        with self._lock:
            real = time.time()
            self._stop_at_barrier(real)
            self._floor = max(self._floor, self._at(real))
            return self._floor

    def simulated_at(self, real_timestamp: float) -> datetime:
        """The simulated time of a past real instant (e.g. when moto stamped an event)."""
        with self._lock:
            return self._at(real_timestamp)

    def timestamp(self) -> float:
        return self.now().timestamp()

    def remaining(self, deadline: float) -> float:
        """Simulated seconds until ``deadline`` (a simulated timestamp); 0 once reached."""
        left = deadline - self.timestamp()
        return left if left > _REACHED_S else 0.0

    # --- holding the clock -------------------------------------------------------------

    def _count(self) -> int:
        """This thread's holds in the current session."""
        if getattr(self._held, "generation", None) != self._generation:
            self._held.generation, self._held.count = self._generation, 0
        return self._held.count

    def _hold(self) -> None:
        with self._lock:
            self._count()
            self._held.count += 1
            self._add_hold()

    def _add_hold(self) -> None:
        if self._depth == 0:
            self._paused_at = time.time()
        self._depth += 1

    def _let_go(self) -> None:
        with self._lock:
            if self._count() == 0:
                return  # held in an earlier session
            self._held.count -= 1
            self._remove_hold()

    def _remove_hold(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            end = time.time()
            total = (self._totals[-1] if self._totals else 0.0) + end - self._paused_at
            self._starts.append(self._paused_at)
            self._ends.append(end)
            self._totals.append(total)
            self._free_since = end

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the clock: it stands still until every holder has let go."""
        self._hold()
        try:
            yield
        finally:
            self._let_go()

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Let go of this thread's holds while it waits for simulated time."""
        with self._lock:
            count = self._count()
        for _ in range(count):
            self._let_go()
        try:
            yield
        finally:
            for _ in range(count):
                self._hold()

    def hold_for_another(self) -> int:
        """Hold the clock on behalf of a thread about to be woken, so no simulated time slips
        through the hand-over; returns the session the hold belongs to."""
        with self._lock:
            self._add_hold()
            return self._generation

    def let_go_for_another(self, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._remove_hold()

    def holds(self) -> int:
        """How many holds this thread has (for tests)."""
        with self._lock:
            return self._count()

    # --- waiting -------------------------------------------------------------------------

    def real_seconds(self, simulated_seconds: float) -> float:
        return max(0.0, simulated_seconds) / self.speed

    def wait(self, simulated_seconds: float,
             woken: Callable[[float], bool] | None = None) -> bool:
        """Wait ``simulated_seconds`` on this clock, letting go of this thread's holds.

        ``woken(real_timeout)`` blocks up to ``real_timeout`` and returns True to end the wait
        early (an event that was set); the result says whether that happened.
        """
        deadline = self.timestamp() + simulated_seconds
        nap = woken or time.sleep
        token = object()
        with self._lock:
            self._deadlines[token] = deadline
        try:  # still a waiter until it holds the clock again: no skip in between
            with self.released():
                while True:
                    remaining = self.remaining(deadline)
                    if remaining <= 0:
                        return False
                    if nap(min(self.real_seconds(remaining), _LOOK_AGAIN_S)) and woken:
                        return True
        finally:
            with self._lock:
                self._deadlines.pop(token, None)
                if token in self._handed:  # held since a skip or the barrier ended this wait
                    self._handed.discard(token)
                    self._remove_hold()

    def fast_forward(self, also_due: Iterable[float | None] = (),
                     idle_s: float = _IDLE_BEFORE_SKIP_S) -> float:
        """Skip the simulated time nobody works in: when no thread has held the clock for
        ``idle_s`` real seconds and threads wait for it, move it to the earliest moment a
        waiter waits for (or one of ``also_due``, simulated timestamps: the next alarm, a
        schedule's next fire). Returns the simulated seconds skipped."""
        due = [t for t in also_due if t is not None]
        with self._lock:
            real = time.time()
            self._stop_at_barrier(real)
            if self._alarm_due is not None:
                due.append(self._alarm_due)
            if self._depth or not self._deadlines or real - self._free_since < idle_s:
                return 0.0
            target = min([*self._deadlines.values(), *due])
            skip = target - max(self._floor, self._at(real)).timestamp()
            if skip <= 0:
                return 0.0
            self._skipped_at.append(real)
            self._skipped.append((self._skipped[-1] if self._skipped else 0.0) + skip)
            # The clock stands still until the waits that end now have woken (each naps up to
            # _LOOK_AGAIN_S), so none of them ends late.
            for token, deadline in self._deadlines.items():
                if deadline <= target:
                    self._handed.add(token)
                    self._add_hold()
            return skip

    def sleep(self, simulated_seconds: float) -> None:
        self.wait(simulated_seconds)

    def simulated_seconds(self, real_start: datetime, real_end: datetime) -> float:
        """Simulated length of a real interval (Step Functions stamps executions in real time)."""
        with self._lock:
            start, end = self._at(real_start.timestamp()), self._at(real_end.timestamp())
        return (end - start).total_seconds()


class SimulatedEvent(threading.Event):
    """A ``threading.Event`` whose ``wait(timeout)`` counts simulated seconds on the clock.

    Setting it while a thread waits holds the clock until that thread runs again: the thread
    that sets it (a callback, a finished task) may let go before the woken one takes over.
    """

    def __init__(self) -> None:
        super().__init__()
        self._waiting = 0
        self._handed_over: int | None = None  # the session of the hold kept for a waiter
        self._guard = threading.Lock()

    def set(self) -> None:
        with self._guard:
            if self._waiting and not self.is_set() and self._handed_over is None:
                self._handed_over = CLOCK.hold_for_another()
            super().set()

    def wait(self, timeout: float | None = None) -> bool:
        with self._guard:
            self._waiting += 1
        try:
            if timeout is None:
                with CLOCK.released():
                    return super().wait()
            if super().wait(0):
                return True
            return CLOCK.wait(timeout, woken=super().wait) or self.is_set()
        finally:
            with self._guard:
                self._waiting -= 1
                handed_over, self._handed_over = self._handed_over, None
            if handed_over is not None:
                CLOCK.let_go_for_another(handed_over)


CLOCK = SimulatedClock()
