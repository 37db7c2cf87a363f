"""The node's configuration, read once from the AWS Batch environment and arguments."""

from __future__ import annotations

import ipaddress
import math
import re
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traingrid_node.status import ConfigError

MPIRUN = "mpirun"
TORCHRUN = "torchrun"
LAUNCHERS = (MPIRUN, TORCHRUN)

DEFAULT_RENDEZVOUS_PORT = 29400
DEFAULT_RENDEZVOUS_TIMEOUT = 600.0
DEFAULT_BIND_ADDRESS = "0.0.0.0"
# What every rank reads from the job's environment (the trainer's defaults, where to meet)...
FORWARDED_VARIABLES = ("JOB_DIR", "OUTPUT_DIR", "SCRATCH_DIR", "EPOCHS", "BATCH_SIZE",
                       "WARMUP_EPOCHS", "LR_DECAY_MODE", "TRAINGRID_RUN",
                       "TRAINGRID_EXPORT_DIR", "TRAINGRID_LFS",
                       "TRAINGRID_MAIN_ADDRESS", "PYTHONPATH", "TRAINGRID_PREFLIGHT",
                       "TRAINGRID_PREFLIGHT_SLOW_RANK")
# ...and the fabric's settings (EFA's libfabric, NCCL).
FORWARDED_PREFIXES = ("FI_", "NCCL_")
DEFAULT_HOSTFILE = "/tmp/traingrid/hostfile"
DEFAULT_FSX_MOUNT_POINT = "/fsx"
DEFAULT_TORCHRUN_PORT = 29500
DEFAULT_MAX_RESTARTS = 3  # elastic torchrun: restarts of the workers after a node fails
# How long torchrun's rendezvous waits for more nodes once min_nodes have met: the nodes start
# together (after the node's own rendezvous), and after a lost node nobody else is coming.
TORCHRUN_LAST_CALL_S = 5.0
DEFAULT_KILL_GRACE = 20.0
DEFAULT_SSHD_COMMAND = "/usr/sbin/sshd"
# The job's ssh keys, host key and configuration, made at start: private to the container.
DEFAULT_SSH_DIR = "/run/traingrid/ssh"
DEFAULT_SSH_PORT = 22
SSH_READY_TIMEOUT = 60.0  # how long the main node waits for workers to authorize the job's key
DEFAULT_NVIDIA_SMI = "nvidia-smi"
DEFAULT_DEV_DIR = "/dev"
DEFAULT_EXPORT_TIMEOUT = 900.0
EXPORT_POLL_INTERVAL = 1.0
EXPORT_BATCH = 200  # files per lfs command line
DEFAULT_PRELOAD_TIMEOUT = 3600.0
# The output index the archive check reads (traingrid.training.archive.OUTPUT_INDEX, tested).
OUTPUT_INDEX = "outputs.json"

PROTOCOL_VERSION = 2
MAX_MESSAGE_BYTES = 64 * 1024
POLL_INTERVAL = 0.2  # seconds between checks for signals / deadlines while waiting
SEND_TIMEOUT = 5.0
MAX_CONNECT_BACKOFF = 2.0
START_GRACE = 60.0  # how long a registered worker waits for "start" beyond the timeout
MOUNT_TIMEOUT = 300.0
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)

NVIDIA_DEVICE_RE = re.compile(r"nvidia(\d+)")
ARCHIVE_NAME_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._-]+")




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
class PreloadConfig:
    """Load the dataset's file contents from S3 onto the file system before training
    (``lfs hsm_restore``), rather than lazily on each file's first read."""

    dataset_dir: Path
    skip_dirs: tuple[Path, ...]  # the outputs folders: nothing there comes from S3
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
    # None: the interface that holds the node's address (traingrid_node.network).
    interface: str | None = None
    nccl_socket_ifname: str | None = None  # the job's own NCCL_SOCKET_IFNAME wins
    gloo_socket_ifname: str | None = None  # the job's own GLOO_SOCKET_IFNAME wins
    efa_devices: int = 0  # EFA interfaces of the instance type (0: TCP only)
    efa_rdma: bool = False
    hostfile: Path = Path(DEFAULT_HOSTFILE)
    torchrun_port: int = DEFAULT_TORCHRUN_PORT
    min_nodes: int | None = None  # torchrun's elastic lower bound (None: all the job's nodes)
    max_restarts: int = DEFAULT_MAX_RESTARTS
    run_id: str = "traingrid"  # torchrun's rendezvous id: the run's name
    kill_grace: float = DEFAULT_KILL_GRACE
    sshd_mode: str = "auto"
    sshd_command: tuple[str, ...] = (DEFAULT_SSHD_COMMAND,)
    ssh_dir: Path = Path(DEFAULT_SSH_DIR)
    ssh_port: int = DEFAULT_SSH_PORT
    fsx: FsxConfig | None = None
    archive: ArchiveConfig | None = None
    export: ExportConfig | None = None
    preload: PreloadConfig | None = None

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
        # The plan's min_nodes: elastic torchrun goes on with this many nodes or more.
        "min_nodes": _env_int(env, "TRAINGRID_MIN_NODES", num_nodes, 1, num_nodes),
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
        "interface": _get(env, "TRAINGRID_INTERFACE") or None,
        "nccl_socket_ifname": _get(env, "NCCL_SOCKET_IFNAME") or None,
        "gloo_socket_ifname": _get(env, "GLOO_SOCKET_IFNAME") or None,
        "efa_devices": _env_int(env, "TRAINGRID_EFA_DEVICES", 0, 0, 64),
        "efa_rdma": _get(env, "TRAINGRID_EFA_RDMA") == "1",
        "hostfile": Path(_get(env, "TRAINGRID_HOSTFILE") or DEFAULT_HOSTFILE),
        "torchrun_port": _env_int(env, "TRAINGRID_TORCHRUN_PORT", DEFAULT_TORCHRUN_PORT, 1, 65535),
        "max_restarts": _env_int(env, "TRAINGRID_MAX_RESTARTS", DEFAULT_MAX_RESTARTS, 0, 100),
        "run_id": _get(env, "TRAINGRID_RUN") or "traingrid",
        "kill_grace": _env_seconds(env, "TRAINGRID_KILL_GRACE", DEFAULT_KILL_GRACE),
        "sshd_mode": _env_mode(env, "TRAINGRID_START_SSHD"),
        "sshd_command": _env_command(env, "TRAINGRID_SSHD_COMMAND") or (DEFAULT_SSHD_COMMAND,),
        "ssh_dir": Path(_get(env, "TRAINGRID_SSH_DIR") or DEFAULT_SSH_DIR),
        "ssh_port": _env_int(env, "TRAINGRID_SSH_PORT", DEFAULT_SSH_PORT, 1, 65535),
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


def export_config(env: Mapping[str, str]) -> ExportConfig | None:
    """Where the outputs are exported from, and the ``lfs`` that does it (None: no export)."""
    output_dir = _get(env, "TRAINGRID_EXPORT_DIR")
    if not output_dir:
        return None
    lfs = _env_command(env, "TRAINGRID_LFS") or ("lfs",)
    timeout = _env_seconds(env, "TRAINGRID_EXPORT_TIMEOUT", DEFAULT_EXPORT_TIMEOUT)
    return ExportConfig(Path(output_dir), lfs, timeout)


def preload_config(env: Mapping[str, str]) -> PreloadConfig | None:
    """The dataset to preload (TRAINGRID_PRELOAD_DIR), if any."""
    dataset_dir = _get(env, "TRAINGRID_PRELOAD_DIR")
    if not dataset_dir:
        return None
    skip = tuple(Path(d) for d in (_get(env, "OUTPUT_DIR"), _get(env, "TRAINGRID_EXPORT_DIR"))
                 if d)
    return PreloadConfig(Path(dataset_dir), skip,
                         _env_command(env, "TRAINGRID_LFS") or ("lfs",),
                         _env_seconds(env, "TRAINGRID_PRELOAD_TIMEOUT",
                                      DEFAULT_PRELOAD_TIMEOUT))


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
        export=export_config(env),
        preload=preload_config(env),
    )
    if cfg.runs_launcher and not cfg.launch_command and not cfg.train_command:
        raise ConfigError(
            "no training command: pass it as the container command or set TRAINGRID_TRAIN_COMMAND"
        )
    return cfg
