"""How many GPUs this node has: /dev/nvidia*, nvidia-smi, or the job's override."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from traingrid_node.config import (
    DEFAULT_DEV_DIR,
    DEFAULT_NVIDIA_SMI,
    NVIDIA_DEVICE_RE,
    _get,
    parse_int,
)


def count_nvidia_devices(dev_dir: Path) -> int:
    """Count /dev/nvidia<N> for any N (nvidiactl, nvidia-uvm, nvidia-modeset... are not GPUs)."""
    try:
        names = [entry.name for entry in dev_dir.iterdir()]
    except OSError:
        return 0
    return sum(1 for name in names if NVIDIA_DEVICE_RE.fullmatch(name))


def count_nvidia_smi_gpus(nvidia_smi: str) -> int | None:
    """GPUs listed by ``nvidia-smi -L``; None when it is missing, fails or lists none."""
    executable = shutil.which(nvidia_smi)
    if executable is None:
        return None
    try:
        result = subprocess.run(
            [executable, "-L"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    count = sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))
    return count or None


def detect_gpus(
    env: Mapping[str, str], dev_dir: Path | None = None, nvidia_smi: str | None = None
) -> tuple[int, str]:
    """Return (number of GPUs, how it was found).

    Order: ``TRAINGRID_GPUS`` override, ``nvidia-smi -L`` (``TRAINGRID_NVIDIA_SMI``, empty to
    skip), then ``/dev/nvidia<N>`` in ``dev_dir`` / ``TRAINGRID_DEV_DIR`` / ``/dev``.
    """
    override = _get(env, "TRAINGRID_GPUS")
    if override:
        return parse_int("TRAINGRID_GPUS", override, 0), "TRAINGRID_GPUS"
    if nvidia_smi is None:
        nvidia_smi = env.get("TRAINGRID_NVIDIA_SMI", DEFAULT_NVIDIA_SMI).strip()
    if nvidia_smi:
        count = count_nvidia_smi_gpus(nvidia_smi)
        if count is not None:
            return count, f"{nvidia_smi} -L"
    if dev_dir is None:
        dev_dir = Path(_get(env, "TRAINGRID_DEV_DIR") or DEFAULT_DEV_DIR)
    return count_nvidia_devices(dev_dir), f"{dev_dir}/nvidia<N>"
