"""The node's elastic torchrun line, run by the real torchrun of the trainer's PyTorch: two
agents meet at a c10d rendezvous on the loopback, and workers that fail are restarted instead
of ending the job (on one node: two agents restarting around a failure race each other on a
loopback, too unevenly for a test)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.trainer.conftest import trainer_env
from traingrid_node.launch import build_torchrun_command

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
# Every rank all-reduces its rank + 1 over Gloo and reports what it saw. A rank whose node is
# named in FAIL_ON_NODE fails its first run (its node's workers fail), then runs normally.
PROGRAM = """
import json, os, pathlib, sys
import torch
import torch.distributed as dist

node = os.environ["NODE"]
marker = pathlib.Path(os.environ["RECORD_DIR"]) / f"failed-{node}"
if os.environ.get("FAIL_ON_NODE") == node and not marker.exists():
    marker.write_text("once")
    sys.exit(3)
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
report = {"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": value.item(),
          "restarts": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))}
path = pathlib.Path(os.environ["RECORD_DIR"]) / f"rank-{dist.get_rank()}.json"
path.write_text(json.dumps(report))
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agents(tmp_path: Path, nodes: int, min_nodes: int, max_restarts: int,
           **env: str) -> list[int]:
    """Start one torchrun agent per node as the node entrypoint would; their exit codes."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    port = free_port()
    processes = []
    for node in range(nodes):
        command = build_torchrun_command(
            min_nodes=min_nodes, max_nodes=nodes, nproc_per_node=1, main_address="127.0.0.1",
            local_address="127.0.0.1", port=port, run_id="run-1", is_main=node == 0,
            max_restarts=max_restarts, train_command=[str(script)])
        # On one machine the rendezvous need not wait long for late nodes.
        command = [f"{arg},last_call_timeout=2" if arg.startswith("--rdzv-conf") else arg
                   for arg in command]
        assert command[0] == "torchrun"
        processes.append(subprocess.Popen(
            [*TORCHRUN, *command[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=trainer_env(NODE=str(node), RECORD_DIR=str(tmp_path), GLOO_SOCKET_IFNAME="lo",
                            **env)))
    codes = []
    try:
        for process in processes:
            out, _ = process.communicate(timeout=240)
            codes.append(process.returncode)
            if process.returncode:
                print(out.decode(errors="replace")[-3000:])
    finally:
        for process in processes:  # an agent left waiting for a peer must not outlive the test
            if process.poll() is None:
                process.terminate()  # the agent stops its workers on SIGTERM
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    return codes


def reports(tmp_path: Path) -> list[dict[str, float]]:
    return sorted((json.loads(p.read_text()) for p in tmp_path.glob("rank-*.json")),
                  key=lambda r: r["rank"])


def test_two_nodes_meet_at_the_main_nodes_rendezvous_and_all_reduce(tmp_path: Path) -> None:
    assert agents(tmp_path, nodes=2, min_nodes=2, max_restarts=0) == [0, 0]
    assert reports(tmp_path) == [{"rank": r, "world": 2, "sum": 3.0, "restarts": 0}
                                 for r in (0, 1)]


def test_a_node_whose_workers_fail_is_restarted_and_the_job_goes_on(tmp_path: Path) -> None:
    assert agents(tmp_path, nodes=1, min_nodes=1, max_restarts=1, FAIL_ON_NODE="0") == [0]
    assert (tmp_path / "failed-0").exists()
    assert reports(tmp_path) == [{"rank": 0, "world": 1, "sum": 1.0, "restarts": 1}]


def test_without_restarts_left_the_failure_ends_the_job(tmp_path: Path) -> None:
    """The check above can fail: with no restarts, the same failure ends the job."""
    assert agents(tmp_path, nodes=1, min_nodes=1, max_restarts=0, FAIL_ON_NODE="0") == [1]
    assert reports(tmp_path) == []
