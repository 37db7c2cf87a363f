"""A checkpoint when the container is stopped.

AWS Batch stops a job's containers as ECS does (``StopTask``: "the equivalent of docker stop
... a stop signal value and a default 30-second timeout, after which the SIGKILL value is
sent"); the node program forwards the SIGTERM to the launcher, which passes it to the ranks,
and SIGKILLs them ``TRAINGRID_KILL_GRACE`` (20 s) later. Rank 0 must have written its
checkpoint by then, even when its main thread waits in a collective whose peers already left:
so the signal wakes a thread of its own (``signal.set_wakeup_fd``), which writes the state of
the last completed step (``guard`` keeps it from reading weights the optimizer is updating).
The training loop stops after its current step and the rank exits ``EXIT_TERMINATED``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

EXIT_TERMINATED = 128 + signal.SIGTERM
SAVE_WAIT_S = 15.0  # within the node's 20 s grace before SIGKILL


class Termination:
    def __init__(self, save: Callable[[], Path] | None, log: Callable[[str], None],
                 on_stop: Callable[[], None] | None = None) -> None:
        self.save, self.log, self.on_stop = save, log, on_stop
        self.requested = threading.Event()
        self.saved = threading.Event()
        self.guard = threading.Lock()  # held while the optimizer updates the weights
        self.path: Path | None = None

    def install(self) -> None:
        """Main thread only (signal handlers and the wakeup descriptor are set there)."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        signal.signal(signal.SIGTERM, self._handle)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        threading.Thread(target=self._wait, args=(read,), name="traingrid-sigterm",
                         daemon=True).start()

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested.set()  # the loop stops after its current step

    def _wait(self, read: int) -> None:
        while True:
            received = os.read(read, 1)
            if not received or received[0] == signal.SIGTERM:
                break
        self.requested.set()
        if self.on_stop is not None:  # before the guard, which a stuck step may hold
            self.on_stop()
        if self.save is None:
            self.saved.set()
            return
        started = time.perf_counter()
        with self.guard:
            self.path = self.save()
        self.log(f"SIGTERM: wrote {self.path} in {time.perf_counter() - started:.2f} s")
        self.saved.set()

    def finish(self) -> int:
        """After the loop stopped on SIGTERM: wait for the checkpoint, then the exit status."""
        if not self.saved.wait(SAVE_WAIT_S):
            self.log(f"SIGTERM: no checkpoint within {SAVE_WAIT_S:g} s")
        return EXIT_TERMINATED
