"""A checkpoint when the container is stopped: Batch sends SIGTERM, then SIGKILL after the
stop timeout (ECS StopTask: 30 s by default; the node program's grace is 20 s)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.trainer.conftest import trainer_env
from tests.trainer.test_torchrun import free_port

TINY = ["--synthetic", "--batch_size", "2", "--image_size", "32", "--log_every", "1",
        "--loader_workers", "0", "--num_epochs", "1", "--steps_per_epoch", "500"]
WINDOW_S = 20.0  # the node's grace between SIGTERM and SIGKILL


def start(rank: int, size: int, port: int, output: Path, *extra: str) -> subprocess.Popen[str]:
    env = trainer_env(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(size),
                      OMPI_COMM_WORLD_LOCAL_RANK=str(rank), TRAINGRID_MAIN_ADDRESS="127.0.0.1",
                      TRAINGRID_TRAINER_PORT=str(port), TRAINGRID_WATCHDOG_FLOOR_S="100")
    return subprocess.Popen([sys.executable, "-u", "-m", "traingrid_trainer", *TINY,
                             "--output_dir", str(output), *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(process: subprocess.Popen[str], pattern: str, seen: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        seen.append(line)
        if re.search(pattern, line):
            return
    raise AssertionError("".join(seen))


def test_sigterm_writes_a_checkpoint_of_the_last_step_and_exits_143(tmp_path: Path) -> None:
    trainer = start(0, 1, free_port(), tmp_path)
    seen: list[str] = []
    wait_for(trainer, r"step 3/500", seen)
    signalled = time.monotonic()
    trainer.send_signal(signal.SIGTERM)
    out, _ = trainer.communicate(timeout=60)
    took = time.monotonic() - signalled
    assert trainer.returncode == 143, "".join(seen) + out
    written = sorted((tmp_path / "checkpoints").glob("epoch-0000-step-*.pt"))
    assert written, out
    assert int(written[-1].name[len("epoch-0000-step-"):-3]) >= 3
    assert took < WINDOW_S, took
    # The next run goes on from there.
    assert "SIGTERM: wrote" in out


def test_sigterm_checkpoints_even_while_the_main_thread_waits_in_a_collective(
        tmp_path: Path) -> None:
    """Rank 1 stops stepping: rank 0 waits in the next step's all-reduce when SIGTERM comes;
    its own thread writes the checkpoint of the last completed step all the same."""
    port = free_port()
    ranks = [start(rank, 2, port, tmp_path, "--hang_rank", "1") for rank in range(2)]
    seen: list[str] = []
    wait_for(ranks[0], r"step 2/500", seen)
    time.sleep(3)  # rank 0 is inside step 3's collective by now
    signalled = time.monotonic()
    ranks[0].send_signal(signal.SIGTERM)
    path = tmp_path / "checkpoints" / "epoch-0000-step-000002.pt"
    while not path.exists() and time.monotonic() - signalled < WINDOW_S:
        time.sleep(0.2)
    took = time.monotonic() - signalled
    for rank in ranks:
        rank.kill()
        rank.communicate(timeout=30)
    assert path.exists(), "".join(seen)
    assert took < WINDOW_S
