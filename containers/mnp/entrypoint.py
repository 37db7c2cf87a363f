#!/usr/bin/env python3
"""TrainGrid node entrypoint for AWS Batch multi-node parallel (MNP) jobs.

Every node of an MNP job runs this script (``python3 entrypoint.py [training command...]``).
It turns the N nodes into one MPI/Horovod or torchrun job:

1. validate the AWS Batch environment and detect this node's GPUs;
2. mount FSx for Lustre when ``FSX_DNS_NAME``/``FSX_MOUNT_NAME`` are set;
3. start sshd when ``mpirun`` on the main node needs to reach the other nodes;
4. rendezvous over TCP: workers register (address, slots) with the main node, which waits for
   all of them (with a timeout) and writes the MPI host file, main node first;
5. launch: ``mpirun`` on the main node only (the workers stay connected until it finishes and
   then exit with its status) or ``torchrun`` on every node;
6. forward SIGTERM/SIGINT to the launcher's process group and exit with its status.

Standard library only. README.md next to this file lists the environment variables and the
exit codes.
"""

import contextlib
import ipaddress
import json
import math
import os
import re
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

EXIT_CONFIG = 64  # missing or invalid environment / arguments
EXIT_MOUNT = 65  # FSx for Lustre mount failed
EXIT_RENDEZVOUS = 66  # rendezvous failed: timeout, main node unreachable, registration rejected
EXIT_MAIN_LOST = 67  # a worker lost its connection to the main node before the final status
EXIT_ARCHIVE = 68  # the launcher succeeded but archiving the outputs failed
EXIT_SSHD = 69  # sshd could not be started
EXIT_NOT_EXECUTABLE = 126  # the launcher could not be executed
EXIT_NOT_FOUND = 127  # the launcher was not found

MPIRUN = "mpirun"
TORCHRUN = "torchrun"
LAUNCHERS = (MPIRUN, TORCHRUN)

DEFAULT_RENDEZVOUS_PORT = 29400
DEFAULT_RENDEZVOUS_TIMEOUT = 600.0
DEFAULT_BIND_ADDRESS = "0.0.0.0"
DEFAULT_NCCL_SOCKET_IFNAME = "^lo,docker0"
DEFAULT_HOSTFILE = "/tmp/traingrid/hostfile"
DEFAULT_FSX_MOUNT_POINT = "/fsx"
DEFAULT_TORCHRUN_PORT = 29500
DEFAULT_KILL_GRACE = 20.0
DEFAULT_SSHD_COMMAND = "/usr/sbin/sshd"
DEFAULT_NVIDIA_SMI = "nvidia-smi"
DEFAULT_DEV_DIR = "/dev"
DEFAULT_EXPORT_TIMEOUT = 900.0
EXPORT_POLL_INTERVAL = 1.0
EXPORT_BATCH = 200  # files per lfs command line
OUTPUT_INDEX = "outputs.json"

PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = 64 * 1024
POLL_INTERVAL = 0.2  # seconds between checks for signals / deadlines while waiting
SEND_TIMEOUT = 5.0
MAX_CONNECT_BACKOFF = 2.0
START_GRACE = 60.0  # how long a registered worker waits for "start" beyond the timeout
MOUNT_TIMEOUT = 300.0
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)

NVIDIA_DEVICE_RE = re.compile(r"nvidia(\d+)")
ARCHIVE_NAME_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._-]+")

# --------------------------------------------------------------------------------------------
# Logging: one line per message on stderr, prefixed with the node index
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Errors: each ends the node with its own exit code
# --------------------------------------------------------------------------------------------


class NodeError(Exception):
    exit_code = 1
    label = "error"


class ConfigError(NodeError):
    exit_code = EXIT_CONFIG
    label = "configuration error"


class MountError(NodeError):
    exit_code = EXIT_MOUNT
    label = "FSx for Lustre mount failed"


class RendezvousError(NodeError):
    exit_code = EXIT_RENDEZVOUS
    label = "rendezvous failed"


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


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FsxConfig:
    dns_name: str
    mount_name: str
    mount_point: Path

    @property
    def source(self) -> str:
        return f"{self.dns_name}@tcp:/{self.mount_name}"


@dataclass(frozen=True)
class ArchiveConfig:
    output_dir: Path
    archive_dir: Path
    name: str

    @property
    def path(self) -> Path:
        return self.archive_dir / f"{self.name}.tar.gz"


@dataclass(frozen=True)
class ExportConfig:
    """Export the outputs to the file system's S3 data repository before the job ends."""

    output_dir: Path
    lfs: tuple[str, ...]
    timeout: float


@dataclass(frozen=True)
class NodeConfig:
    node_index: int
    num_nodes: int
    main_index: int
    main_address: str | None = None
    node_address: str | None = None
    port: int = DEFAULT_RENDEZVOUS_PORT
    bind_address: str = DEFAULT_BIND_ADDRESS
    timeout: float = DEFAULT_RENDEZVOUS_TIMEOUT
    launcher: str = MPIRUN
    launch_command: tuple[str, ...] = ()
    train_command: tuple[str, ...] = ()
    extra_mpi_params: tuple[str, ...] = ()
    mpi_gpus: int | None = None
    nccl_socket_ifname: str = DEFAULT_NCCL_SOCKET_IFNAME
    hostfile: Path = Path(DEFAULT_HOSTFILE)
    torchrun_port: int = DEFAULT_TORCHRUN_PORT
    kill_grace: float = DEFAULT_KILL_GRACE
    sshd_mode: str = "auto"
    sshd_command: tuple[str, ...] = (DEFAULT_SSHD_COMMAND,)
    fsx: FsxConfig | None = None
    archive: ArchiveConfig | None = None
    export: ExportConfig | None = None

    @property
    def is_main(self) -> bool:
        return self.node_index == self.main_index

    @property
    def runs_launcher(self) -> bool:
        """mpirun runs on the main node only; torchrun runs on every node."""
        return self.is_main or self.launcher == TORCHRUN


def _get(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()


def _require(env: Mapping[str, str], name: str, why: str = "") -> str:
    value = _get(env, name)
    if not value:
        raise ConfigError(f"{name} is not set{why}")
    return value


def parse_int(name: str, raw: str, minimum: int, maximum: int | None = None) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ConfigError(f"{name} must be {bounds}, got {value}")
    return value


def _env_int(
    env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    raw = _get(env, name)
    return default if not raw else parse_int(name, raw, minimum, maximum)


def _env_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _get(env, name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a positive number of seconds, got {raw!r}")
    return value


def _env_command(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(env.get(name, "")))
    except ValueError as exc:
        raise ConfigError(f"{name} is not a valid shell-style command line: {exc}") from None


def _env_mode(env: Mapping[str, str], name: str) -> str:
    raw = _get(env, name).lower() or "auto"
    modes = {"auto": "auto", "1": "on", "true": "on", "yes": "on", "on": "on"}
    modes |= {"0": "off", "false": "off", "no": "off", "off": "off"}
    if raw not in modes:
        raise ConfigError(f"{name} must be auto, 1 or 0, got {raw!r}")
    return modes[raw]


def _parse_ipv4(name: str, raw: str) -> str:
    try:
        return str(ipaddress.IPv4Address(raw))
    except ValueError:
        raise ConfigError(f"{name} must be an IPv4 address, got {raw!r}") from None


def _parse_topology(env: Mapping[str, str]) -> dict[str, Any]:
    batch = " (set by AWS Batch for multi-node parallel jobs)"
    num_nodes = parse_int(
        "AWS_BATCH_JOB_NUM_NODES", _require(env, "AWS_BATCH_JOB_NUM_NODES", batch), 1
    )
    last = num_nodes - 1
    node_index = parse_int(
        "AWS_BATCH_JOB_NODE_INDEX", _require(env, "AWS_BATCH_JOB_NODE_INDEX", batch), 0, last
    )
    main_index = parse_int(
        "AWS_BATCH_JOB_MAIN_NODE_INDEX",
        _require(env, "AWS_BATCH_JOB_MAIN_NODE_INDEX", batch),
        0,
        last,
    )
    address_var = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"
    raw_address = _get(env, address_var)
    if not raw_address and node_index != main_index:
        raise ConfigError(f"{address_var} is not set (required on worker nodes)")
    return {
        "node_index": node_index,
        "num_nodes": num_nodes,
        "main_index": main_index,
        "main_address": _parse_ipv4(address_var, raw_address) if raw_address else None,
    }


def _parse_rendezvous(env: Mapping[str, str]) -> dict[str, Any]:
    return {
        "node_address": _get(env, "TRAINGRID_NODE_ADDRESS") or None,
        "port": _env_int(env, "TRAINGRID_RENDEZVOUS_PORT", DEFAULT_RENDEZVOUS_PORT, 1, 65535),
        "bind_address": _get(env, "TRAINGRID_RENDEZVOUS_BIND") or DEFAULT_BIND_ADDRESS,
        "timeout": _env_seconds(env, "TRAINGRID_RENDEZVOUS_TIMEOUT", DEFAULT_RENDEZVOUS_TIMEOUT),
    }


def _parse_launch(env: Mapping[str, str], argv: Sequence[str]) -> dict[str, Any]:
    launcher = _get(env, "TRAINGRID_LAUNCHER").lower() or MPIRUN
    if launcher not in LAUNCHERS:
        raise ConfigError(
            f"TRAINGRID_LAUNCHER must be one of {', '.join(LAUNCHERS)}, got {launcher!r}"
        )
    raw_mpi_gpus = _get(env, "MPI_GPUS")
    return {
        "launcher": launcher,
        "launch_command": _env_command(env, "TRAINGRID_LAUNCH_COMMAND"),
        "train_command": tuple(argv) or _env_command(env, "TRAINGRID_TRAIN_COMMAND"),
        "extra_mpi_params": _env_command(env, "EXTRA_MPI_PARAMS"),
        "mpi_gpus": parse_int("MPI_GPUS", raw_mpi_gpus, 1) if raw_mpi_gpus else None,
        "nccl_socket_ifname": _get(env, "NCCL_SOCKET_IFNAME") or DEFAULT_NCCL_SOCKET_IFNAME,
        "hostfile": Path(_get(env, "TRAINGRID_HOSTFILE") or DEFAULT_HOSTFILE),
        "torchrun_port": _env_int(env, "TRAINGRID_TORCHRUN_PORT", DEFAULT_TORCHRUN_PORT, 1, 65535),
        "kill_grace": _env_seconds(env, "TRAINGRID_KILL_GRACE", DEFAULT_KILL_GRACE),
        "sshd_mode": _env_mode(env, "TRAINGRID_START_SSHD"),
        "sshd_command": _env_command(env, "TRAINGRID_SSHD_COMMAND") or (DEFAULT_SSHD_COMMAND,),
    }


def _parse_fsx(env: Mapping[str, str]) -> FsxConfig | None:
    dns_name, mount_name = _get(env, "FSX_DNS_NAME"), _get(env, "FSX_MOUNT_NAME")
    if not dns_name and not mount_name:
        return None
    if not dns_name or not mount_name:
        missing = "FSX_DNS_NAME" if not dns_name else "FSX_MOUNT_NAME"
        raise ConfigError(f"{missing} is not set but the other FSX_* variable is")
    mount_point = Path(_get(env, "FSX_MOUNT_POINT") or DEFAULT_FSX_MOUNT_POINT)
    return FsxConfig(dns_name, mount_name, mount_point)


def _parse_archive(env: Mapping[str, str]) -> ArchiveConfig | None:
    output_dir, archive_dir = _get(env, "TRAINGRID_OUTPUT_DIR"), _get(env, "TRAINGRID_ARCHIVE_DIR")
    if not output_dir and not archive_dir:
        return None
    if not output_dir or not archive_dir:
        missing = "TRAINGRID_OUTPUT_DIR" if not output_dir else "TRAINGRID_ARCHIVE_DIR"
        raise ConfigError(f"{missing} is not set but the other archive variable is")
    return ArchiveConfig(Path(output_dir), Path(archive_dir), archive_name(env))


def _parse_export(env: Mapping[str, str]) -> ExportConfig | None:
    output_dir = _get(env, "TRAINGRID_EXPORT_DIR")
    if not output_dir:
        return None
    lfs = _env_command(env, "TRAINGRID_LFS") or ("lfs",)
    timeout = _env_seconds(env, "TRAINGRID_EXPORT_TIMEOUT", DEFAULT_EXPORT_TIMEOUT)
    return ExportConfig(Path(output_dir), lfs, timeout)


def archive_name(env: Mapping[str, str]) -> str:
    """traingrid-<job id>[-attempt<n>], safe as a file name (AWS Batch ids contain '#')."""
    name = f"traingrid-{_get(env, 'AWS_BATCH_JOB_ID') or 'local'}"
    attempt = _get(env, "AWS_BATCH_JOB_ATTEMPT")
    if attempt:
        name += f"-attempt{attempt}"
    return ARCHIVE_NAME_UNSAFE_RE.sub("-", name)


def parse_config(env: Mapping[str, str], argv: Sequence[str] = ()) -> NodeConfig:
    """Build the node configuration; raises ConfigError with a one-line message."""
    cfg = NodeConfig(
        **_parse_topology(env),
        **_parse_rendezvous(env),
        **_parse_launch(env, argv),
        fsx=_parse_fsx(env),
        archive=_parse_archive(env),
        export=_parse_export(env),
    )
    if cfg.runs_launcher and not cfg.launch_command and not cfg.train_command:
        raise ConfigError(
            "no training command: pass it as the container command or set TRAINGRID_TRAIN_COMMAND"
        )
    return cfg


# --------------------------------------------------------------------------------------------
# GPU detection
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Host file and launcher commands (pure functions)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    node_index: int
    address: str
    slots: int


def order_members(members: Collection[Member], main_index: int) -> list[Member]:
    """Main node first, then the others by node index."""
    return sorted(members, key=lambda m: (m.node_index != main_index, m.node_index))


def render_hostfile(members: Collection[Member], main_index: int) -> str:
    return "".join(f"{m.address} slots={m.slots}\n" for m in order_members(members, main_index))


def build_mpirun_command(
    *,
    hostfile: Path | str,
    num_processes: int,
    train_command: Sequence[str],
    nccl_socket_ifname: str = DEFAULT_NCCL_SOCKET_IFNAME,
    extra_mpi_params: Sequence[str] = (),
) -> list[str]:
    return [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        str(num_processes),
        "--hostfile",
        str(hostfile),
        "-bind-to",
        "socket",
        "-map-by",
        "slot",
        "-mca",
        "pml",
        "ob1",
        "-mca",
        "btl",
        "^openib",
        "-x",
        f"NCCL_SOCKET_IFNAME={nccl_socket_ifname}",
        "-x",
        "LD_LIBRARY_PATH",
        "-x",
        "PATH",
        *extra_mpi_params,
        *train_command,
    ]


def build_torchrun_command(
    *,
    num_nodes: int,
    nproc_per_node: int,
    node_rank: int,
    master_addr: str,
    master_port: int,
    train_command: Sequence[str],
) -> list[str]:
    """torchrun with a static rendezvous on the main node.

    A command whose first word is a ``.py`` script is handed to torchrun as is (torchrun runs it
    with Python); anything else (``python -u train.py``, a shell script...) runs with
    ``--no-python``.
    """
    command = [
        "torchrun",
        f"--nnodes={num_nodes}",
        f"--nproc-per-node={nproc_per_node}",
        f"--node-rank={node_rank}",
        f"--master-addr={master_addr}",
        f"--master-port={master_port}",
    ]
    if train_command and not train_command[0].endswith(".py"):
        command.append("--no-python")
    return [*command, *train_command]


def build_mount_command(fsx: FsxConfig) -> list[str]:
    return ["mount", "-t", "lustre", "-o", "relatime,flock", fsx.source, str(fsx.mount_point)]


def timeout_message(timeout: float, missing: Sequence[int], num_nodes: int) -> str:
    noun = "node" if len(missing) == 1 else "nodes"
    indices = ", ".join(str(index) for index in missing)
    return f"rendezvous timed out after {timeout:g}s: {noun} {indices} of {num_nodes} never joined"


# --------------------------------------------------------------------------------------------
# Rendezvous protocol: one JSON object per line
#   worker -> main  {"type": "register", "protocol": 1, "node_index", "num_nodes", "address",
#                    "slots"}
#   main -> worker  {"type": "start", "node_rank", "num_nodes", "launcher"}
#   main -> worker  {"type": "exit", "status", "reason"}   (final status, or a rejection)
# --------------------------------------------------------------------------------------------


def encode_message(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode_message(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ProtocolError("message is not valid JSON") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("message is not a JSON object with a 'type'")
    return message


def _int_field(message: Mapping[str, Any], key: str) -> int:
    value = message.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"registration field {key!r} must be an integer")
    return value


def registration_message(cfg: NodeConfig, address: str, slots: int) -> dict[str, Any]:
    return {
        "type": "register",
        "protocol": PROTOCOL_VERSION,
        "node_index": cfg.node_index,
        "num_nodes": cfg.num_nodes,
        "address": address,
        "slots": slots,
    }


def parse_registration(
    message: Mapping[str, Any], cfg: NodeConfig, joined: Collection[int], peer_address: str
) -> Member:
    """Validate a worker's registration against the main node's view of the job."""
    if message.get("type") != "register":
        raise ProtocolError(f"expected a 'register' message, got {message.get('type')!r}")
    if message.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {message.get('protocol')!r}")
    index, num_nodes, slots = (_int_field(message, k) for k in ("node_index", "num_nodes", "slots"))
    if num_nodes != cfg.num_nodes:
        raise ProtocolError(f"node {index} reports {num_nodes} nodes, main expects {cfg.num_nodes}")
    if not 0 <= index < cfg.num_nodes or index == cfg.main_index:
        raise ProtocolError(f"invalid worker node index {index}")
    if index in joined:
        raise ProtocolError(f"node {index} is already registered")
    if slots < 1:
        raise ProtocolError(f"node {index} registered {slots} slots")
    address = message.get("address") or peer_address
    if not isinstance(address, str) or not address or any(c.isspace() for c in address):
        raise ProtocolError(f"node {index} registered an invalid address {address!r}")
    return Member(index, address, slots)


def enable_keepalive(sock: socket.socket) -> None:
    """Detect a vanished peer during long trainings instead of waiting forever."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 15), ("TCP_KEEPCNT", 4)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


@dataclass(eq=False)
class _Peer:
    sock: socket.socket
    address: str
    buffer: bytearray = field(default_factory=bytearray)
    member: Member | None = None


class RendezvousServer:
    """Main-node side of the rendezvous: collects the workers' registrations."""

    def __init__(self, cfg: NodeConfig, listener: socket.socket) -> None:
        self.cfg = cfg
        self.listener: socket.socket | None = listener
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.peers: list[_Peer] = []
        self.joined: dict[int, _Peer] = {}

    @classmethod
    def listen(cls, cfg: NodeConfig) -> "RendezvousServer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((cfg.bind_address, cfg.port))
            sock.listen(max(cfg.num_nodes, 16))
        except OSError as exc:
            sock.close()
            raise RendezvousError(
                f"cannot listen on {cfg.bind_address}:{cfg.port}: {exc}"
            ) from None
        sock.setblocking(False)
        return cls(cfg, sock)

    @property
    def expected(self) -> int:
        return self.cfg.num_nodes - 1

    def missing(self) -> list[int]:
        return [
            i
            for i in range(self.cfg.num_nodes)
            if i != self.cfg.main_index and i not in self.joined
        ]

    def gather(self, deadline: float, interrupts: "SignalForwarder") -> list[Member]:
        """Wait until every worker registered; raise RendezvousError at the deadline."""
        while len(self.joined) < self.expected:
            interrupts.check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RendezvousError(
                    timeout_message(self.cfg.timeout, self.missing(), self.cfg.num_nodes)
                )
            for key, _ in self.selector.select(min(remaining, POLL_INTERVAL)):
                if key.data is None:
                    self._accept()
                else:
                    self._read(key.data)
        self._stop_listening()
        return [p.member for p in self.joined.values() if p.member is not None]

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            sock, (host, _port) = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.settimeout(SEND_TIMEOUT)
        enable_keepalive(sock)
        peer = _Peer(sock, host)
        self.peers.append(peer)
        self.selector.register(sock, selectors.EVENT_READ, peer)

    def _read(self, peer: _Peer) -> None:
        try:
            chunk = peer.sock.recv(4096)
        except (BlockingIOError, InterruptedError, TimeoutError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(peer)
            return
        if peer.member is not None:
            return  # nothing is expected after the registration; ignore it
        peer.buffer += chunk
        if b"\n" not in peer.buffer:
            if len(peer.buffer) > MAX_MESSAGE_BYTES:
                self._reject(peer, "registration message too long")
            return
        line = bytes(peer.buffer.split(b"\n", 1)[0])
        try:
            member = parse_registration(decode_message(line), self.cfg, self.joined, peer.address)
        except ProtocolError as exc:
            self._reject(peer, str(exc))
            return
        peer.member = member
        self.joined[member.node_index] = peer
        log(
            f"node {member.node_index} joined from {peer.address} as {member.address} with "
            f"{member.slots} slot(s) ({len(self.joined)}/{self.expected} workers)"
        )

    def _reject(self, peer: _Peer, reason: str) -> None:
        log(f"rejected a registration from {peer.address}: {reason}")
        self._send(peer, {"type": "exit", "status": EXIT_RENDEZVOUS, "reason": reason})
        self._drop(peer, quiet=True)

    def _drop(self, peer: _Peer, quiet: bool = False) -> None:
        if peer.member is not None and self.joined.get(peer.member.node_index) is peer:
            del self.joined[peer.member.node_index]
            if not quiet:
                log(f"node {peer.member.node_index} disconnected before the rendezvous completed")
        self._close_peer(peer)

    def _close_peer(self, peer: _Peer) -> None:
        if peer in self.peers:
            self.peers.remove(peer)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(peer.sock)
        peer.sock.close()

    def _stop_listening(self) -> None:
        if self.listener is not None:
            self.selector.unregister(self.listener)
            self.listener.close()
            self.listener = None

    def _send(self, peer: _Peer, message: Mapping[str, Any]) -> bool:
        try:
            peer.sock.sendall(encode_message(message))
        except OSError as exc:
            name = f"node {peer.member.node_index}" if peer.member else peer.address
            log(f"could not send {message.get('type')!r} to {name}: {exc}")
            return False
        return True

    def local_address(self) -> str | None:
        """This node's address as seen by the workers (the local end of their connections)."""
        for peer in self.joined.values():
            try:
                return str(peer.sock.getsockname()[0])
            except OSError:
                continue
        return None

    def send_start(self, ranks: Mapping[int, int]) -> None:
        for index, peer in sorted(self.joined.items()):
            message = {
                "type": "start",
                "node_rank": ranks[index],
                "num_nodes": self.cfg.num_nodes,
                "launcher": self.cfg.launcher,
            }
            self._send(peer, message)

    def send_exit(self, status: int, reason: str) -> None:
        """Tell every connected worker to exit with ``status``."""
        for peer in list(self.peers):
            self._send(peer, {"type": "exit", "status": status, "reason": reason})

    def close(self) -> None:
        for peer in list(self.peers):
            self._close_peer(peer)
        self.joined.clear()
        self._stop_listening()
        self.selector.close()


class MainConnection:
    """Worker side of the rendezvous: a line-oriented JSON connection to the main node."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    @classmethod
    def connect(
        cls, host: str, port: int, timeout: float, interrupts: "SignalForwarder"
    ) -> "MainConnection":
        """Connect with exponential backoff until ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        delay, attempts = 0.1, 0
        while True:
            interrupts.check()
            remaining = deadline - time.monotonic()
            try:
                sock = socket.create_connection((host, port), timeout=max(min(remaining, 5.0), 0.1))
            except OSError as exc:
                attempts += 1
                if attempts == 1 or attempts % 20 == 0:
                    log(f"main node {host}:{port} not reachable yet ({exc}); retrying")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RendezvousError(
                        f"cannot reach main node {host}:{port} within {timeout:g}s "
                        f"({attempts} attempts): {exc}"
                    ) from None
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, MAX_CONNECT_BACKOFF)
                continue
            sock.settimeout(POLL_INTERVAL)
            enable_keepalive(sock)
            return cls(sock)

    def local_address(self) -> str:
        return str(self.sock.getsockname()[0])

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            self.sock.sendall(encode_message(message))
        except OSError as exc:
            raise MainLostError(f"cannot send to the main node: {exc}") from None

    def receive(self, interrupts: "SignalForwarder", deadline: float | None = None) -> dict:
        """Next message from the main node; waits until ``deadline`` (monotonic) if given."""
        while b"\n" not in self.buffer:
            interrupts.check()
            if deadline is not None and time.monotonic() >= deadline:
                raise RendezvousError("the main node did not start the job in time")
            try:
                chunk = self.sock.recv(4096)
            except (TimeoutError, InterruptedError):
                continue
            except OSError as exc:
                raise MainLostError(f"connection to the main node failed: {exc}") from None
            if not chunk:
                raise MainLostError("the main node closed the connection without a final status")
            self.buffer += chunk
            if len(self.buffer) > MAX_MESSAGE_BYTES:
                raise MainLostError("message from the main node is too long")
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        try:
            return decode_message(line)
        except ProtocolError as exc:
            raise MainLostError(f"bad message from the main node: {exc}") from None

    def close(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------------------------
# Signals and the launcher process
# --------------------------------------------------------------------------------------------


class SignalForwarder:
    """Records SIGTERM/SIGINT and forwards them to the launcher's process group."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._forwarded_at: float | None = None

    def install(self) -> None:
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signum
        log(f"received {signal_name(signum)}")
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            return
        if self._forwarded_at is None:
            self._forwarded_at = time.monotonic()
        log(f"forwarded {signal_name(signum)} to the launcher (process group {proc.pid})")

    def check(self) -> None:
        """Raise Interrupted if a signal arrived while no launcher was running."""
        if self.received is not None:
            raise Interrupted(self.received)

    def attach(self, proc: "subprocess.Popen[bytes]") -> None:
        self._proc = proc
        if self.received is not None:  # arrived while the launcher was being started
            self._forward(self.received)

    def detach(self) -> None:
        self._proc = None

    def kill_due(self, grace: float) -> bool:
        return self._forwarded_at is not None and time.monotonic() - self._forwarded_at >= grace


def run_launcher(
    command: Sequence[str],
    env: Mapping[str, str],
    interrupts: SignalForwarder,
    kill_grace: float,
) -> int:
    """Run the launcher in its own process group and return its exit status."""
    interrupts.check()
    log(f"starting launcher: {shlex.join(command)}")
    try:
        proc = subprocess.Popen(list(command), env=dict(env), start_new_session=True)
    except FileNotFoundError:
        log(f"launcher not found: {command[0]}")
        return EXIT_NOT_FOUND
    except OSError as exc:
        log(f"cannot start launcher {command[0]}: {exc}")
        return EXIT_NOT_EXECUTABLE
    interrupts.attach(proc)
    try:
        returncode = _wait_for_launcher(proc, interrupts, kill_grace)
    finally:
        interrupts.detach()
    status = exit_status(returncode)
    if returncode < 0:
        log(f"launcher was killed by {signal_name(-returncode)} (status {status})")
    else:
        log(f"launcher exited with status {status}")
    return status


def _wait_for_launcher(
    proc: "subprocess.Popen[bytes]", interrupts: SignalForwarder, kill_grace: float
) -> int:
    killed = False
    while True:
        try:
            return proc.wait(timeout=POLL_INTERVAL * 5)
        except subprocess.TimeoutExpired:
            pass
        if not killed and interrupts.kill_due(kill_grace):
            log(f"launcher still running {kill_grace:g}s after the signal; sending SIGKILL")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            killed = True


# --------------------------------------------------------------------------------------------
# Node set-up steps: FSx mount, sshd, host file, archive
# --------------------------------------------------------------------------------------------


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


def write_hostfile(path: Path, members: Collection[Member], main_index: int) -> str:
    content = render_hostfile(members, main_index)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content)
    tmp.replace(path)
    return content


def archive_outputs(archive: ArchiveConfig) -> Path:
    """tar.gz the output directory into the archive directory (atomically renamed)."""
    if not archive.output_dir.is_dir():
        raise FileNotFoundError(f"output directory {archive.output_dir} does not exist")
    archive.archive_dir.mkdir(parents=True, exist_ok=True)
    target = archive.path
    tmp = target.with_name(f".{target.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(archive.output_dir, arcname=archive.output_dir.name or "output")
    tmp.replace(target)
    return target


def archive_if_configured(cfg: NodeConfig, status: int) -> int:
    if cfg.archive is None:
        return status
    try:
        target = archive_outputs(cfg.archive)
    except (OSError, tarfile.TarError) as exc:
        log(f"archiving {cfg.archive.output_dir} failed: {exc}")
        return EXIT_ARCHIVE if status == 0 else status
    log(f"archived {cfg.archive.output_dir} to {target}")
    return status


def write_output_index(output_dir: Path) -> list[Path]:
    """Write OUTPUT_INDEX (every output's path and size) and return the files to export.

    Written after the launcher exits, so it lists what the run left behind; whoever deletes
    the file system checks S3 against it."""
    index = output_dir / OUTPUT_INDEX
    tmp = index.with_name(f".{index.name}.tmp")
    files = sorted(p for p in output_dir.rglob("*") if p.is_file() and p not in (index, tmp))
    entries = [{"path": p.relative_to(output_dir).as_posix(), "size": p.stat().st_size}
               for p in files]
    tmp.write_text(json.dumps({"files": entries}, indent=1) + "\n")
    tmp.replace(index)
    return [*files, index]


def _lfs(export: ExportConfig, action: str, files: Sequence[Path]) -> str:
    """Run ``lfs <action>`` over the files in batches; the combined standard output."""
    out = []
    for start in range(0, len(files), EXPORT_BATCH):
        batch = [str(f) for f in files[start:start + EXPORT_BATCH]]
        result = subprocess.run([*export.lfs, action, *batch], capture_output=True, text=True,
                                timeout=120, check=False)
        if result.returncode != 0:
            raise OSError(f"{export.lfs[0]} {action} exited {result.returncode}: "
                          f"{result.stderr.strip()[-300:]}")
        out.append(result.stdout)
    return "".join(out)


def _archived(state_output: str) -> set[str]:
    """Files that ``lfs hsm_state`` reports archived and unchanged since (not dirty)."""
    done = set()
    for line in state_output.splitlines():
        path, sep, flags = line.rpartition(": ")
        words = set(re.split(r"[\s,]+", flags))
        if sep and "archived" in words and "dirty" not in words:
            done.add(path)
    return done


def export_outputs(export: ExportConfig) -> tuple[int, int]:
    """Ask Lustre to archive every output to the S3 data repository (``lfs hsm_archive``)
    and wait until each is archived or the timeout passes: (archived, total)."""
    files = write_output_index(export.output_dir)
    _lfs(export, "hsm_archive", files)
    deadline = time.monotonic() + export.timeout
    waiting = [str(f) for f in files]
    while True:
        waiting = sorted(set(waiting) - _archived(_lfs(export, "hsm_state",
                                                       [Path(f) for f in waiting])))
        if not waiting or time.monotonic() >= deadline:
            return len(files) - len(waiting), len(files)
        time.sleep(EXPORT_POLL_INTERVAL)


def export_if_configured(cfg: NodeConfig) -> None:
    """Export on exit never changes the job's status: whatever is not in S3 by then, the
    state machine's export task copies before the file system goes."""
    if cfg.export is None:
        return
    if not cfg.export.output_dir.is_dir():
        log(f"nothing to export: {cfg.export.output_dir} does not exist")
        return
    started = time.monotonic()
    try:
        archived, total = export_outputs(cfg.export)
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"exporting {cfg.export.output_dir} failed: {exc}")
        return
    took = time.monotonic() - started
    if archived < total:
        log(f"exported {archived} of {total} output file(s) in {took:.0f}s; "
            "the rest is left to the export task")
    else:
        log(f"exported {total} output file(s) to the data repository in {took:.1f}s")


# --------------------------------------------------------------------------------------------
# Node roles
# --------------------------------------------------------------------------------------------


def detect_local_address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def resolve_main_address(cfg: NodeConfig, server: RendezvousServer | None) -> str:
    """The address the other nodes use for the main node (first line of the host file)."""
    if cfg.node_address:
        return cfg.node_address
    if cfg.main_address:
        return cfg.main_address
    if cfg.bind_address not in ("", "0.0.0.0"):
        return cfg.bind_address
    seen_by_workers = server.local_address() if server else None
    return seen_by_workers or detect_local_address()


def launcher_env(cfg: NodeConfig, node_rank: int, main_address: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        TRAINGRID_NODE_RANK=str(node_rank),
        TRAINGRID_NUM_NODES=str(cfg.num_nodes),
        TRAINGRID_MAIN_ADDRESS=main_address,
    )
    if cfg.is_main:
        env["TRAINGRID_HOSTFILE"] = str(cfg.hostfile)
    return env


def launch_command(
    cfg: NodeConfig, *, node_rank: int, main_address: str, slots: int, total_slots: int
) -> list[str]:
    if cfg.launch_command:
        return list(cfg.launch_command)
    if cfg.launcher == TORCHRUN:
        return build_torchrun_command(
            num_nodes=cfg.num_nodes,
            nproc_per_node=slots,
            node_rank=node_rank,
            master_addr=main_address,
            master_port=cfg.torchrun_port,
            train_command=cfg.train_command,
        )
    num_processes = cfg.mpi_gpus or total_slots
    if num_processes > total_slots:
        log(f"MPI_GPUS={num_processes} exceeds the {total_slots} slot(s) in the host file")
    return build_mpirun_command(
        hostfile=cfg.hostfile,
        num_processes=num_processes,
        train_command=cfg.train_command,
        nccl_socket_ifname=cfg.nccl_socket_ifname,
        extra_mpi_params=cfg.extra_mpi_params,
    )


def run_main(cfg: NodeConfig, slots: int, interrupts: SignalForwarder) -> int:
    server = RendezvousServer.listen(cfg) if cfg.num_nodes > 1 else None
    try:
        workers: list[Member] = []
        if server is not None:
            log(
                f"waiting for {server.expected} worker(s) on {cfg.bind_address}:{cfg.port} "
                f"(timeout {cfg.timeout:g}s)"
            )
            workers = server.gather(time.monotonic() + cfg.timeout, interrupts)
        address = resolve_main_address(cfg, server)
        members = order_members([Member(cfg.main_index, address, slots), *workers], cfg.main_index)
        content = write_hostfile(cfg.hostfile, members, cfg.main_index)
        hosts = "; ".join(content.splitlines())
        log(f"all {cfg.num_nodes} node(s) joined; wrote host file {cfg.hostfile}: {hosts}")
        ranks = {m.node_index: rank for rank, m in enumerate(members)}
        if server is not None:
            server.send_start(ranks)
            if cfg.launcher == TORCHRUN:
                server.close()  # every node runs its own torchrun from here on
        command = launch_command(
            cfg,
            node_rank=0,
            main_address=address,
            slots=slots,
            total_slots=sum(m.slots for m in members),
        )
        status = run_launcher(command, launcher_env(cfg, 0, address), interrupts, cfg.kill_grace)
        status = archive_if_configured(cfg, status)
        export_if_configured(cfg)
        if server is not None and cfg.launcher == MPIRUN:
            server.send_exit(status, f"main node finished with status {status}")
        return status
    except NodeError as exc:
        if server is not None:
            server.send_exit(exc.exit_code, f"main node: {exc.label}: {exc}")
        raise
    finally:
        if server is not None:
            server.close()


def _status_from_main(message: Mapping[str, Any]) -> int:
    status = message.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status <= 255:
        status = 1
    reason = message.get("reason") or "no reason given"
    log(f"main node reported status {status} ({reason}); exiting {status}")
    return status


def run_worker(cfg: NodeConfig, slots: int, interrupts: SignalForwarder) -> int:
    assert cfg.main_address is not None
    log(f"connecting to main node {cfg.main_address}:{cfg.port} (timeout {cfg.timeout:g}s)")
    conn = MainConnection.connect(cfg.main_address, cfg.port, cfg.timeout, interrupts)
    try:
        address = cfg.node_address or conn.local_address()
        conn.send(registration_message(cfg, address, slots))
        log(f"registered as {address} with {slots} slot(s); waiting for the other nodes")
        message = conn.receive(interrupts, time.monotonic() + cfg.timeout + START_GRACE)
        if message["type"] == "exit":
            return _status_from_main(message)
        if message["type"] != "start":
            raise RendezvousError(f"unexpected {message['type']!r} message from the main node")
        node_rank = message.get("node_rank")
        if cfg.launcher == MPIRUN:
            log("main node started mpirun; staying up until it finishes")
            while message["type"] != "exit":
                message = conn.receive(interrupts)
            return _status_from_main(message)
    finally:
        conn.close()
    if not isinstance(node_rank, int) or isinstance(node_rank, bool):
        raise RendezvousError(f"main node sent an invalid node rank {node_rank!r}")
    command = launch_command(
        cfg, node_rank=node_rank, main_address=cfg.main_address, slots=slots, total_slots=slots
    )
    env = launcher_env(cfg, node_rank, cfg.main_address)
    return run_launcher(command, env, interrupts, cfg.kill_grace)


def run_node(cfg: NodeConfig, slots: int, interrupts: SignalForwarder) -> int:
    mount_fsx(cfg.fsx)
    start_sshd(cfg)
    if cfg.is_main:
        return run_main(cfg, slots, interrupts)
    return run_worker(cfg, slots, interrupts)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    argv = sys.argv[1:] if argv is None else argv
    set_log_node(_get(env, "AWS_BATCH_JOB_NODE_INDEX") or "?")
    interrupts = SignalForwarder()
    interrupts.install()
    try:
        cfg = parse_config(env, argv)
        gpus, source = detect_gpus(env)
        slots = max(gpus, 1)
        role = "main" if cfg.is_main else f"worker of main node {cfg.main_index}"
        log(
            f"node {cfg.node_index} of {cfg.num_nodes} ({role}); launcher {cfg.launcher}; "
            f"{gpus} GPU(s) via {source}; {slots} slot(s)"
        )
        return run_node(cfg, slots, interrupts)
    except NodeError as exc:
        log(f"{exc.label}: {exc}")
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
