"""In-job recovery: three elastic torchrun agents (nodes) train the real trainer on the
loopback; one worker node dies mid-epoch (its agent and ranks killed). The two left restart
their ranks, which go on from rank 0's newest mid-epoch checkpoint (Young/Daly's interval,
short here: a failure expected every few seconds), and finish the run on a world of 2: the job
never ends, so no new attempt is needed. ``make mpi-smoke NODES=3 LOSE_NODE=2`` does the same
with a node's network cut in the namespace rig, and measures the recovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.trainer.conftest import trainer_env
from tests.trainer.test_torchrun import TORCHRUN, free_port
from traingrid_node.launch import build_torchrun_command

STEPS = 30
TRAIN = ["-m", "traingrid_trainer", "--synthetic", "--batch_size", "2", "--image_size", "32",
         "--log_every", "1", "--loader_workers", "0", "--num_epochs", "1",
         "--steps_per_epoch", str(STEPS)]


def descendants(pid: int) -> list[int]:
    """``pid``'s processes: torchrun starts its workers in sessions of their own."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def test_a_lost_worker_node_costs_a_restart_from_the_newest_checkpoint_not_the_job(
        tmp_path: Path) -> None:
    output, port = tmp_path / "out", free_port()
    processes = []
    for node in range(3):
        command = build_torchrun_command(
            min_nodes=2, max_nodes=3, nproc_per_node=1, main_address="127.0.0.1",
            local_address="127.0.0.1", port=port, run_id="recovery", is_main=node == 0,
            max_restarts=2, train_command=["python3", *TRAIN, "--output_dir", str(output)])
        # As the node program sets it for torchrun (traingrid_node.launch.launcher_env).
        env = trainer_env(GLOO_SOCKET_IFNAME="lo", TRAINGRID_NUM_NODES="3",
                          TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
                          TRAINGRID_NODE_MTBF_HOURS="0.01", TRAINGRID_COLLECTIVE_TIMEOUT_S="30")
        env["PATH"] = f"{Path(TORCHRUN[0]).parent}:{env['PATH']}"
        with (tmp_path / f"node-{node}.log").open("w") as log:
            processes.append(subprocess.Popen([*TORCHRUN, *command[1:]], stdout=log,
                                              stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))
    checkpoints = output / "checkpoints"
    try:
        deadline = time.monotonic() + 180
        while not list(checkpoints.glob("epoch-0000-step-*.pt")):
            assert time.monotonic() < deadline, "no mid-epoch checkpoint"
            assert processes[0].poll() is None
            time.sleep(0.2)
        for pid in descendants(processes[2].pid):  # node 2 is gone, its ranks with it
            os.kill(pid, signal.SIGKILL)
        assert processes[0].wait(timeout=240) == 0
        assert processes[1].wait(timeout=60) == 0
    finally:
        for process in processes:
            if process.poll() is None:
                for pid in descendants(process.pid):
                    os.kill(pid, signal.SIGKILL)
                process.wait()
    logs = "".join(p.read_text() for p in sorted(tmp_path.glob("node-*.log")))
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["world_size"] == 2, logs[-3000:]
    assert metrics["epochs"] == 1
    # The restart went on from a mid-epoch checkpoint, not from the start of the epoch.
    assert "resuming after epoch 0 step" in logs, logs[-3000:]
    assert metrics["resumed_from"] and "-step-" in metrics["resumed_from"]
    assert metrics["steps"] < STEPS
    # The trainer reports the recovery for the run's goodput: a world of 3 nodes became 2.
    (recovery,) = metrics["recoveries"]
    assert (recovery["nodes_before"], recovery["nodes_after"]) == (3, 2), recovery
    assert (recovery["world_size_before"], recovery["world_size_after"]) == (3, 2)
    assert 0 < recovery["recovery_s"] < 240
    assert recovery["steps_lost"] >= 0 and recovery["lost_work_s"] >= 0
    assert "recovered in the job: 3 → 2 node(s)" in logs, logs[-3000:]
