"""Exit codes, the errors that end a node with them, and the node's log lines."""

from __future__ import annotations

import os
import signal

EXIT_CONFIG = 64  # missing or invalid environment / arguments
EXIT_MOUNT = 65  # FSx for Lustre mount failed
EXIT_RENDEZVOUS = 66  # rendezvous failed: timeout, main node unreachable, registration rejected
EXIT_MAIN_LOST = 67  # a worker lost its connection to the main node before the final status
EXIT_ARCHIVE = 68  # the launcher succeeded but archiving the outputs failed
EXIT_SSHD = 69  # sshd could not be started
EXIT_FABRIC = 70  # the instance type has EFA but the container sees fewer EFA devices
# The trainer's watchdog saw no training step within its window: a rank hung (its verdict names
# the node and rank; traingrid_trainer.watchdog), so another attempt on other hosts may pass.
EXIT_STALLED = 71
# The trainer's pre-flight check found a node far below the others (EX_TEMPFAIL: another
# attempt on other hosts may pass); mpirun and the node pass it on.
EXIT_PREFLIGHT = 75
EXIT_NOT_EXECUTABLE = 126  # the launcher could not be executed
EXIT_NOT_FOUND = 127  # the launcher was not found



_log_prefix = "[traingrid node ?]"


def set_log_node(index: object) -> None:
    global _log_prefix
    _log_prefix = f"[traingrid node {index}]"


def log(message: str) -> None:
    """Write one line to stderr. Uses os.write so that it is safe inside signal handlers."""
    text = " ".join(str(message).splitlines()) or "-"
    data = f"{_log_prefix} {text}\n".encode(errors="replace")
    try:
        while data:
            data = data[os.write(2, data) :]
    except OSError:
        pass




class NodeError(Exception):
    exit_code = 1
    label = "error"


class ConfigError(NodeError):
    exit_code = EXIT_CONFIG
    label = "configuration error"


class FabricError(NodeError):
    exit_code = EXIT_FABRIC
    label = "EFA devices missing"


class MountError(NodeError):
    exit_code = EXIT_MOUNT
    label = "FSx for Lustre mount failed"


class RendezvousError(NodeError):
    exit_code = EXIT_RENDEZVOUS
    label = "rendezvous failed"


class NetworkError(RendezvousError):
    """No interface carries the node's address: the nodes cannot reach each other."""

    label = "network interface"


class MainLostError(NodeError):
    exit_code = EXIT_MAIN_LOST
    label = "lost the main node"


class SshdError(NodeError):
    exit_code = EXIT_SSHD
    label = "sshd failed"


class ProtocolError(ValueError):
    """A malformed or unacceptable rendezvous message."""


class Interrupted(NodeError):
    label = "interrupted"

    def __init__(self, signum: int) -> None:
        super().__init__(f"received {signal_name(signum)}")
        self.signum = signum
        self.exit_code = 128 + signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_status(returncode: int) -> int:
    """Map a Popen return code to a shell-style exit status (killed by signal N -> 128+N)."""
    return 128 - returncode if returncode < 0 else returncode
