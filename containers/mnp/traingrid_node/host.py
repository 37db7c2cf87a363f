"""What a node sets up on its host before training: the FSx for Lustre mount, sshd, and
its own address."""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess

from traingrid_node.config import MOUNT_TIMEOUT, MPIRUN, FsxConfig, NodeConfig
from traingrid_node.status import MountError, SshdError, log


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
    """auto: mpirun over more than one node needs sshd on every node (not with a custom
    TRAINGRID_LAUNCH_COMMAND)."""
    if cfg.sshd_mode != "auto":
        return cfg.sshd_mode == "on"
    return cfg.launcher == MPIRUN and cfg.num_nodes > 1 and not cfg.launch_command


def start_sshd(cfg: NodeConfig) -> None:
    if not sshd_wanted(cfg):
        return
    command = list(cfg.sshd_command)
    if cfg.sshd_mode == "auto" and shutil.which(command[0]) is None:
        log(f"{command[0]} not found; not starting sshd (set TRAINGRID_START_SSHD=1 to require it)")
        return
    try:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SshdError(f"cannot run {shlex.join(command)}: {exc}") from None
    if result.returncode != 0:
        detail = _last_line(result.stderr)
        raise SshdError(f"{shlex.join(command)} exited {result.returncode}: {detail}")
    log(f"started sshd: {shlex.join(command)}")




def detect_local_address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
