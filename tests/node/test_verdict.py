"""The trainer's watchdog's verdict: the main node stops its launcher (which would otherwise
restart hung ranks, or keep them) and exits with the verdict's status."""

from __future__ import annotations

import os
import time
from pathlib import Path

from traingrid_node import verdict
from traingrid_node.launch import run_launcher
from traingrid_node.signals import SignalForwarder
from traingrid_node.status import EXIT_STALLED

# A launcher whose rank leaves a verdict and then, like a torchrun agent, keeps running.
LAUNCHER = ["sh", "-c", 'printf \'{"status": 71, "reason": "rank 1 on node 1 stalled"}\' '
            '> "$TRAINGRID_VERDICT_FILE"; sleep 60']


def test_a_verdict_stops_the_launcher_and_becomes_the_nodes_status(tmp_path: Path) -> None:
    path = tmp_path / "verdict.json"
    path.write_text('{"status": 3, "reason": "a previous launch"}')  # cleared at start
    env = {**os.environ, verdict.VERDICT_VARIABLE: str(path)}
    started = time.monotonic()
    status = run_launcher(LAUNCHER, env, SignalForwarder(), kill_grace=5.0)
    assert status == EXIT_STALLED
    assert time.monotonic() - started < 10  # not the launcher's 60 s


def test_without_a_verdict_the_launchers_own_status_stands(tmp_path: Path) -> None:
    env = {**os.environ, verdict.VERDICT_VARIABLE: str(tmp_path / "verdict.json")}
    assert run_launcher(["sh", "-c", "exit 4"], env, SignalForwarder(), kill_grace=5.0) == 4


def test_a_verdict_is_written_whole_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "v.json"
    assert verdict.read(path) is None
    verdict.write(path, 71, "rank 2 on node 2 stalled")
    assert verdict.read(path) == (71, "rank 2 on node 2 stalled")
    path.write_text("{not json")
    unreadable = verdict.read(path)
    assert unreadable is not None and unreadable[0] == 1 and "unreadable" in unreadable[1]
