"""SIGTERM and SIGINT: recorded while the node prepares, forwarded to the launcher's process
group once it runs (AWS Batch sends SIGTERM when a job is terminated)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from types import FrameType

from traingrid_node.config import FORWARDED_SIGNALS
from traingrid_node.status import Interrupted, log, signal_name


class SignalForwarder:
    """Records SIGTERM/SIGINT and forwards them to the launcher's process group."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._forwarded_at: float | None = None

    def install(self) -> None:
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signum
        log(f"received {signal_name(signum)}")
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            return
        if self._forwarded_at is None:
            self._forwarded_at = time.monotonic()
        log(f"forwarded {signal_name(signum)} to the launcher (process group {proc.pid})")

    def check(self) -> None:
        """Raise Interrupted if a signal arrived while no launcher was running."""
        if self.received is not None:
            raise Interrupted(self.received)

    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        if self.received is not None:  # arrived while the launcher was being started
            self._forward(self.received)

    def stop_launcher(self) -> None:
        """SIGTERM to the launcher's process group, SIGKILL after the grace, as if Batch
        had stopped the container (the trainer's watchdog ended the job)."""
        self._forward(signal.SIGTERM)

    def detach(self) -> None:
        self._proc = None

    def kill_due(self, grace: float) -> bool:
        return self._forwarded_at is not None and time.monotonic() - self._forwarded_at >= grace
