"""The trainer's tests: PyTorch on the CPU, and a real ``mpirun`` for the multi-rank ones."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

MNP = Path(__file__).resolve().parents[2] / "containers" / "mnp"
# The trainer and node packages import from here, as in the image.
sys.path.insert(0, str(MNP))
MPIRUN = shutil.which("mpirun")
needs_mpirun = pytest.mark.skipif(MPIRUN is None, reason="no mpirun (make openmpi installs it)")


def trainer_env(**extra: str) -> dict[str, str]:
    """This environment without any launcher's or job's variables, plus ``extra``."""
    ambient = ("OMPI_", "PMIX_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "JOB_DIR",
               "OUTPUT_DIR", "EPOCHS", "BATCH_SIZE", "WARMUP_EPOCHS", "LR_DECAY_MODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(ambient)}
    env.update({"PYTHONPATH": str(MNP), "OMP_NUM_THREADS": "1", **extra})
    return env


def run_trainer(args: Sequence[str], timeout: float = 120,
                **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traingrid_trainer", *args],
                          env=trainer_env(**env), capture_output=True, text=True,
                          timeout=timeout, check=False)
