"""What a node sets up on its host before training: the FSx for Lustre mount, sshd, and
what it has of shared memory."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from traingrid_node.config import MOUNT_TIMEOUT, MPIRUN, FsxConfig, NodeConfig
from traingrid_node.ssh import sshd_installed, start_sshd
from traingrid_node.status import MountError, log

SHARED_MEMORY = Path("/dev/shm")


def build_mount_command(fsx: FsxConfig) -> list[str]:
    return ["mount", "-t", "lustre", "-o", "relatime,flock", fsx.source, str(fsx.mount_point)]






def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def mount_fsx(fsx: FsxConfig | None) -> None:
    if fsx is None:
        log("FSx for Lustre not configured (FSX_DNS_NAME/FSX_MOUNT_NAME unset); skipping mount")
        return
    if fsx.mount_point.is_mount():
        log(f"{fsx.mount_point} is already a mount point; skipping FSx mount")
        return
    command = build_mount_command(fsx)
    log(f"mounting FSx for Lustre: {shlex.join(command)}")
    try:
        fsx.mount_point.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=MOUNT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise MountError(f"mount of {fsx.source} timed out after {MOUNT_TIMEOUT:g}s") from None
    except OSError as exc:
        raise MountError(f"cannot mount {fsx.source} on {fsx.mount_point}: {exc}") from None
    if result.returncode != 0:
        detail = _last_line(result.stderr or result.stdout)
        raise MountError(
            f"mount of {fsx.source} on {fsx.mount_point} exited {result.returncode}: {detail}"
        )
    log(f"mounted {fsx.source} on {fsx.mount_point}")


def sshd_wanted(cfg: NodeConfig) -> bool:
    """auto: the workers of an mpirun job over more than one node (not with a custom
    TRAINGRID_LAUNCH_COMMAND), where the main node's mpirun starts their ranks through ssh."""
    if cfg.sshd_mode != "auto":
        return cfg.sshd_mode == "on"
    return (cfg.launcher == MPIRUN and cfg.num_nodes > 1 and not cfg.launch_command
            and not cfg.is_main)


def start_sshd_if_wanted(cfg: NodeConfig, address: str) -> str | None:
    """Start sshd on ``address`` when the job needs it; its host key, or None."""
    if not sshd_wanted(cfg):
        return None
    if cfg.sshd_mode == "auto" and not sshd_installed(cfg.sshd_command):
        log(f"{cfg.sshd_command[0]} not found; not starting sshd (set TRAINGRID_START_SSHD=1 to "
            "require it)")
        return None
    return start_sshd(cfg.sshd_command, cfg.ssh_dir, address, cfg.ssh_port)


def shared_memory_mib(path: Path = SHARED_MEMORY) -> int | None:
    """The size of /dev/shm, where PyTorch's data loader workers hand batches over."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_blocks * stats.f_frsize // (1024 * 1024)
