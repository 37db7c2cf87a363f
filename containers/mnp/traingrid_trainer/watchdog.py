"""Every rank's progress, the main node's watchdog over it, and the ranks' stacks on demand.

Each rank posts its progress (step, phase, time, node) to the job's store (the c10d TCPStore the
ranks met at: rank 0's under mpirun, the main node agent's under torchrun) at the start of
every step. A watchdog thread on the main node (its local rank 0; rank 0 where no node program
runs) reads them every second. When no rank has started a step for longer than the window —
``STEP_FACTOR`` times the median step time it measured, never less than the floor
(``TRAINGRID_WATCHDOG_FLOOR_S``) nor more than the collective timeout allows (under elastic
torchrun, twice the timeout: its errors restart the ranks first) — it names the
rank behind the others (the fewest steps; among equals, the oldest report) and its node, asks
every rank for its stacks (each rank's listener thread prints them with
``faulthandler.dump_traceback`` to its log; ``kill -USR1`` on a rank does the same), writes its
verdict for the node program (``traingrid_node.verdict``) and exits ``EXIT_STALLED``: the job
ends with an infrastructure status, and the attempt loop runs it again on other hosts.

Collectives time out after ``TRAINGRID_COLLECTIVE_TIMEOUT_S`` (the process group's timeout;
NCCL with asynchronous error handling), so a rank whose peer is gone gets an error, not a hang:
elastic torchrun then restarts the workers on the nodes that are left.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import socket
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from traingrid_node.status import EXIT_STALLED
from traingrid_node.verdict import VERDICT_VARIABLE, write

DEFAULT_FLOOR_S = 45.0
STEP_FACTOR = 20.0
# A peer that is gone is an error after this long; the longest wait inside a collective (rank 0
# writing a checkpoint while the others wait) must stay below it.
DEFAULT_COLLECTIVE_TIMEOUT_S = 60.0
POLL_S = 1.0
DUMP_WAIT_S = 3.0  # for the other ranks to print their stacks before the job ends
STORE_TIMEOUT = timedelta(seconds=30)
STEP_SAMPLES = 50
# Step times measured before the window follows them: the first steps (warm-up, the first
# checkpoint) say little of the rest; until then the window is the cap.
MIN_SAMPLES = 3


def seconds_from(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise SystemExit(f"{name} must be positive, got {raw!r}")
    return value


def collective_timeout(env: Mapping[str, str]) -> timedelta:
    return timedelta(seconds=seconds_from(env, "TRAINGRID_COLLECTIVE_TIMEOUT_S",
                                          DEFAULT_COLLECTIVE_TIMEOUT_S))


def stall_window(step_seconds: Sequence[float], floor_s: float, cap_s: float,
                 factor: float = STEP_FACTOR) -> float:
    """How long without a step is a stall: ``factor`` x the median step time, at least
    ``floor_s``, at most ``cap_s`` (past the collective timeout a hang is an error already);
    ``cap_s`` until ``MIN_SAMPLES`` steps were timed."""
    if len(step_seconds) < MIN_SAMPLES:
        return cap_s
    return min(max(floor_s, factor * statistics.median(step_seconds)), cap_s)


@dataclass(frozen=True)
class Report:
    rank: int
    step: int
    phase: str  # "step", or a legitimate pause: "checkpoint", "evaluate", "done"
    time: float
    node: str | None  # the node index, where the rank knows it
    address: str


def behind(reports: Sequence[Report]) -> list[Report]:
    """The ranks that stopped first: those with the fewest steps; if every rank is at the same
    step, those whose last report is the oldest."""
    fewest = min(r.step for r in reports)
    stalled = [r for r in reports if r.step == fewest]
    if len(stalled) < len(reports):
        return stalled
    oldest = min(r.time for r in reports)
    return [r for r in reports if r.time == oldest]


def local_address(main_address: str) -> str:
    """The address this node reaches the main node from (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((main_address, 9))
            return str(probe.getsockname()[0])
        except OSError:
            return "?"


def node_names(env: Mapping[str, str]) -> dict[str, str]:
    """Address -> node, from the main node's host file (main first, then by node index)."""
    path = env.get("TRAINGRID_HOSTFILE")
    if not path or not Path(path).is_file():
        return {}
    lines = [line.split()[0] for line in Path(path).read_text().splitlines() if line.strip()]
    return {address: str(index) for index, address in enumerate(lines)}


class Progress:
    """This rank's reports to the job's store (a client of its own), and what it reads back."""

    def __init__(self, store: Any, rank: int, size: int, node: str | None, address: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.rank, self.size = store, rank, size
        self.node, self.address, self.clock = node, address, clock
        self.lock = threading.Lock()
        self.step_seconds: deque[float] = deque(maxlen=STEP_SAMPLES)
        self._last_step: float | None = None

    def report(self, step: int, phase: str = "step") -> None:
        now = self.clock()
        if phase == "step":
            if self._last_step is not None:
                self.step_seconds.append(now - self._last_step)
            self._last_step = now
        else:
            self._last_step = None  # a pause is not a step's time
        document = {"step": step, "phase": phase, "time": now, "node": self.node,
                    "address": self.address}
        with self.lock:
            self.store.set(f"progress/{self.rank}", json.dumps(document))

    def reports(self) -> list[Report] | None:
        """Every rank's latest report; None until every rank has made one."""
        keys = [f"progress/{r}" for r in range(self.size)]
        with self.lock:
            if not self.store.check(keys):
                return None
            raw = [self.store.get(key) for key in keys]
        return [Report(rank, **json.loads(value)) for rank, value in enumerate(raw)]

    def ask_for_stacks(self) -> None:
        with self.lock:
            self.store.set("stacks", "1")

    def stacks_asked(self) -> bool:
        with self.lock:
            return bool(self.store.check(["stacks"]))


def dump_stacks(rank: int, why: str) -> None:
    print(f"[trainer rank {rank}] stacks ({why}):", file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()


class Watchdog:
    """The main node's watch over every rank's progress (a daemon thread)."""

    def __init__(self, progress: Progress, floor_s: float, cap_s: float,
                 verdict: Path | None, env: Mapping[str, str],
                 leave: Callable[[int], None] = os._exit) -> None:
        self.progress, self.floor_s, self.cap_s = progress, floor_s, cap_s
        self.verdict, self.leave = verdict, leave
        self.names = node_names(env)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="traingrid-watchdog", daemon=True)

    def window(self) -> float:
        return stall_window(list(self.progress.step_seconds), self.floor_s, self.cap_s)

    def _run(self) -> None:
        while not self.stop.wait(POLL_S):
            try:
                reports = self.progress.reports()
            except Exception:  # the store's host is gone: the collectives fail on their own
                return
            if not reports or any(r.phase != "step" for r in reports):
                continue
            idle = time.time() - max(r.time for r in reports)
            window = self.window()
            if idle > window:
                self.end(reports, idle, window)
                return

    def describe(self, reports: Sequence[Report], idle: float, window: float) -> str:
        samples = list(self.progress.step_seconds)
        rule = (f"{STEP_FACTOR:g} x the median step {statistics.median(samples):.2f} s, floor "
                f"{self.floor_s:g} s" if len(samples) >= MIN_SAMPLES else
                f"too few steps timed: the collective timeout's {self.cap_s:g} s")
        stalled = behind(reports)
        # Steps counted from 1: the last step each rank began.
        names = ", ".join(
            f"rank {r.rank} on node {r.node or self.names.get(r.address, '?')} ({r.address}), "
            f"which last began step {r.step + 1}" for r in stalled)
        return (f"no training step for {idle:.0f} s (window {window:.0f} s: {rule}); "
                f"stalled: {names}; "
                f"the furthest rank began step {max(r.step for r in reports) + 1}")

    def end(self, reports: Sequence[Report], idle: float, window: float) -> None:
        reason = self.describe(reports, idle, window)
        if self.verdict is not None:  # first: this rank may yet fail in its collective
            write(self.verdict, EXIT_STALLED, reason)
        print(f"[trainer watchdog] {reason}; asking every rank for its stacks and ending the "
              f"job with status {EXIT_STALLED}", file=sys.stderr, flush=True)
        try:
            self.progress.ask_for_stacks()  # this rank's listener prints its own too
        except Exception:
            dump_stacks(self.progress.rank, "the watchdog's own rank")
        time.sleep(DUMP_WAIT_S)
        self.leave(EXIT_STALLED)


def _listen(progress: Progress) -> None:
    """Print this rank's stacks when the watchdog asks (every rank, hung or not)."""
    while True:
        time.sleep(POLL_S)
        try:
            if progress.stacks_asked():
                dump_stacks(progress.rank, "asked by the watchdog")
                return
        except Exception:
            return


class Monitor:
    """What train.py holds: report steps and pauses; the watchdog where this rank hosts it."""

    def __init__(self, progress: Progress | None, watchdog: Watchdog | None) -> None:
        self.progress, self.watchdog = progress, watchdog

    def step(self, step: int) -> None:
        if self.progress is not None:
            self.progress.report(step)

    @contextlib.contextmanager
    def paused(self, phase: str, step: int) -> Iterator[None]:
        """A legitimate wait without steps (a checkpoint, the evaluation): not a stall."""
        if self.progress is not None:
            self.progress.report(step, phase)
        yield

    def done(self, step: int) -> None:
        if self.progress is not None:
            self.progress.report(step, "done")
        if self.watchdog is not None:
            self.watchdog.stop.set()


def start(rank: int, size: int, local_rank: int, main_address: str, port: int,
          env: Mapping[str, str] = os.environ) -> Monitor:
    """Connect to the job's store and start the threads (nothing for a single rank)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: this rank's stacks
    if size == 1:
        return Monitor(None, None)
    import torch.distributed as dist

    store = dist.PrefixStore(
        f"traingrid/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/",
        dist.TCPStore(main_address, port, is_master=False, timeout=STORE_TIMEOUT))
    progress = Progress(store, rank, size, env.get("AWS_BATCH_JOB_NODE_INDEX"),
                        local_address(main_address))
    threading.Thread(target=_listen, args=(progress,), name="traingrid-stacks",
                     daemon=True).start()
    verdict = env.get(VERDICT_VARIABLE)
    hosts = local_rank == 0 if verdict else rank == 0
    watchdog = None
    if hosts:
        timeout = collective_timeout(env).total_seconds()
        floor = seconds_from(env, "TRAINGRID_WATCHDOG_FLOOR_S", DEFAULT_FLOOR_S)
        if "TORCHELASTIC_RUN_ID" in env:
            # Elastic: a stall that ends in a collective's timeout is an error, and torchrun
            # restarts the ranks on the nodes left; the watchdog ends the job only for a stall
            # that raises nothing, after twice the timeout.
            floor = cap = max(floor, 2 * timeout)
        else:
            # mpirun cannot go on without a rank: name the stalled one, and gather the stacks,
            # before the timeout's error ends the ranks (exit 71 is an infrastructure
            # failure: a new attempt, on other hosts).
            cap = max(POLL_S, min(0.9 * timeout, timeout - DUMP_WAIT_S - 3 * POLL_S))
            floor = min(floor, cap)
        watchdog = Watchdog(progress, floor, cap, Path(verdict) if verdict else None, env)
        watchdog.thread.start()
    return Monitor(progress, watchdog)
