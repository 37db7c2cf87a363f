"""The node's mpirun line, run by the real mpirun of this machine's Open MPI, and the trainer
across real MPI ranks (Gloo on the CPU: the same code path as NCCL on GPUs)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.conftest import MPIRUN, needs_mpirun, trainer_env
from traingrid_node.launch import build_mpirun_command, forwarded_variables
from traingrid_node.metrics import METRICS_FILE, problems

pytestmark = needs_mpirun

# On one machine the line's interface is the loopback (MPI, its daemons, NCCL and Gloo).
LOCAL = ["-x", "OMP_NUM_THREADS=1"]
REPORT = ("import json, os; print(json.dumps({'rank': os.environ['OMPI_COMM_WORLD_RANK'], "
          "'job_dir': os.environ.get('JOB_DIR'), 'fi': os.environ.get('FI_PROVIDER'), "
          "'nccl': os.environ.get('NCCL_SOCKET_IFNAME')}))")


def mpirun(command: list[str], env: dict[str, str],
           timeout: float = 180) -> subprocess.CompletedProcess[str]:
    assert MPIRUN is not None
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def line(tmp_path: Path, ranks: int, command: list[str], env: dict[str, str],
         **kwargs: object) -> list[str]:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(f"localhost slots={ranks}\n")
    return build_mpirun_command(hostfile=hostfile, num_processes=ranks, train_command=command,
                                interface="lo",
                                forwarded=forwarded_variables(env),
                                extra_mpi_params=LOCAL, **kwargs)  # type: ignore[arg-type]


def test_the_real_mpirun_accepts_the_line_and_every_rank_gets_the_job_environment(
        tmp_path: Path) -> None:
    env = trainer_env(JOB_DIR="/fsx/imagenet", FI_PROVIDER="efa")

    result = mpirun(line(tmp_path, 2, [sys.executable, "-c", REPORT], env), env)
    assert result.returncode == 0, result.stderr
    # mpirun forwards each rank's output as it comes: two reports may share a line.
    reports = sorted((json.loads(x) for x in re.findall(r"\{[^{}]*\}", result.stdout)),
                     key=lambda r: r["rank"])
    assert reports == [{"rank": str(r), "job_dir": "/fsx/imagenet", "fi": "efa", "nccl": "lo"}
                       for r in (0, 1)]


def test_the_real_mpirun_refuses_a_broken_line(tmp_path: Path) -> None:
    """The check above can fail: an option this Open MPI does not know stops the launch."""

    env = trainer_env()
    command = line(tmp_path, 2, [sys.executable, "-c", "pass"], env)
    command[command.index("--bind-to") + 1] = "nowhere"
    result = mpirun(command, env, timeout=60)
    assert result.returncode != 0


def test_the_trainer_all_reduces_across_two_mpi_ranks(tmp_path: Path) -> None:

    output = tmp_path / "run"
    env = trainer_env(OUTPUT_DIR=str(output), TRAINGRID_MAIN_ADDRESS="127.0.0.1")
    command = [sys.executable, "-m", "traingrid_trainer", "--synthetic", "--num_epochs", "1",
               "--warmup_epochs", "0", "--steps_per_epoch", "2", "-b", "2", "--image_size",
               "32", "--log_every", "1", "--loader_workers", "0"]
    result = mpirun(line(tmp_path, 2, command, env), env)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((output / METRICS_FILE).read_text())
    assert problems(document) == []
    assert document["world_size"] == 2 and document["allreduce_ok"] is True
    assert document["global_batch"] == 4 and document["images_per_second"] > 0


def test_a_failing_rank_fails_the_launch_with_its_status(tmp_path: Path) -> None:

    env = trainer_env(OUTPUT_DIR=str(tmp_path / "run"), TRAINGRID_MAIN_ADDRESS="127.0.0.1")
    command = [sys.executable, "-m", "traingrid_trainer", "--synthetic", "--num_epochs", "1",
               "--warmup_epochs", "0", "--steps_per_epoch", "1", "-b", "2", "--image_size",
               "32", "--loader_workers", "0", "--fail_rank", "1"]
    result = mpirun(line(tmp_path, 2, command, env), env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failing as asked (--fail_rank 1)" in result.stdout + result.stderr


@pytest.mark.parametrize("name", ["OMPI_COMM_WORLD_RANK", "HOME"])
def test_only_the_job_and_fabric_variables_are_forwarded(name: str) -> None:
    env = {"JOB_DIR": "/fsx", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_DEBUG": "INFO",
           "NCCL_SOCKET_IFNAME": "eth0", name: "x"}
    assert forwarded_variables(env) == ["JOB_DIR", "FI_EFA_USE_DEVICE_RDMA", "NCCL_DEBUG"]
