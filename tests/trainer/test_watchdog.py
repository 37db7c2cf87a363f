"""The watchdog over every rank's progress: two real ranks over Gloo, one of which stops
stepping (``--hang_rank``); rank 0's watchdog ends the job with the infrastructure status 71
within its window, names the rank, and every rank prints its stacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.trainer.conftest import trainer_env
from tests.trainer.test_torchrun import free_port
from traingrid_trainer.watchdog import Report, behind, stall_window

TINY = ["--synthetic", "--batch_size", "2", "--image_size", "32", "--log_every", "1",
        "--loader_workers", "0", "--num_epochs", "1", "--steps_per_epoch", "40"]
FLOOR_S = 4.0


def test_the_window_is_the_measured_step_time_times_the_factor_above_a_floor() -> None:
    assert stall_window([], floor_s=60, cap_s=108) == 108  # nothing measured yet
    assert stall_window([0.2, 0.3], floor_s=60, cap_s=108) == 108
    assert stall_window([0.2, 0.3, 0.25], floor_s=60, cap_s=108) == 60
    assert stall_window([4.0, 5.0, 100.0], floor_s=60, cap_s=1000) == 100  # 20 x the median
    assert stall_window([30.0], floor_s=60, cap_s=108) == 108  # below the collective timeout


def test_the_rank_behind_the_others_is_the_stalled_one() -> None:
    def at(rank: int, step: int, when: float) -> Report:
        return Report(rank, step, "step", when, str(rank), f"10.0.0.{rank}")

    assert [r.rank for r in behind([at(0, 5, 10.0), at(1, 4, 9.0), at(2, 5, 10.1)])] == [1]
    # All at the same step: the one that reported last longest ago.
    assert [r.rank for r in behind([at(0, 5, 10.0), at(1, 5, 8.0), at(2, 5, 10.1)])] == [1]


def test_a_rank_that_stops_stepping_ends_the_job_with_71_naming_it(tmp_path: Path) -> None:
    port = free_port()
    verdict = tmp_path / "verdict.json"
    ranks = []
    for rank in range(2):
        env = trainer_env(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE="2",
                          OMPI_COMM_WORLD_LOCAL_RANK=str(rank),
                          TRAINGRID_MAIN_ADDRESS="127.0.0.1", TRAINGRID_TRAINER_PORT=str(port),
                          TRAINGRID_WATCHDOG_FLOOR_S=str(FLOOR_S),
                          TRAINGRID_VERDICT_FILE=str(verdict))
        ranks.append(subprocess.Popen(
            [sys.executable, "-m", "traingrid_trainer", *TINY, "--hang_rank", "1",
             "--output_dir", str(tmp_path / "out")], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    main_out, _ = ranks[0].communicate(timeout=120)
    ranks[1].kill()
    hung_out, _ = ranks[1].communicate(timeout=30)
    assert ranks[0].returncode == 71, main_out
    assert "stalled: rank 1 on node" in main_out, main_out
    assert "hanging as asked (--hang_rank 1)" in hung_out
    # Every rank's stacks: the hung one shows where it waits.
    assert "stacks (asked by the watchdog)" in hung_out and "_hang_as_asked" in hung_out
    assert "stacks (asked by the watchdog)" in main_out
    document = json.loads(verdict.read_text())
    assert document["status"] == 71 and "rank 1" in document["reason"]
    # Named within a window under the collective timeout (60 s), so before a collective
    # could end the job with an error instead (how long start-up takes is the machine's).
    window = float(re.search(r"\(window (\d+) s", document["reason"]).group(1))
    assert FLOOR_S <= window < 60, document["reason"]
