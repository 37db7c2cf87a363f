"""Fixtures for the multi-node parallel (MNP) node entrypoint tests.

The entrypoint is the package ``traingrid_node`` (containers/mnp/traingrid_node): unit tests
import it, process tests run ``python -m traingrid_node`` with the current interpreter.
"""

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ENTRYPOINT = ("-m", "traingrid_node")

# Ambient variables that would change the entrypoint's behaviour; removed from child envs.
_AMBIENT_PREFIXES = ("AWS_BATCH_", "TRAINGRID_", "FSX_")
_AMBIENT_NAMES = {"MPI_GPUS", "EXTRA_MPI_PARAMS", "NCCL_SOCKET_IFNAME"}

PROCESS_TIMEOUT = 15.0


@pytest.fixture
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Node:
    index: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    def wait(self, timeout: float = PROCESS_TIMEOUT) -> int:
        return self.proc.wait(timeout=timeout)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@dataclass
class Cluster:
    """Starts entrypoint processes on 127.0.0.1 that rendezvous on one free port."""

    tmp_path: Path
    port: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def hostfile(self) -> Path:
        return self.tmp_path / "hostfile"

    def env(
        self, index: int, num_nodes: int, overrides: Mapping[str, str | None] | None = None
    ) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(_AMBIENT_PREFIXES) and key not in _AMBIENT_NAMES
        }
        env.update(
            AWS_BATCH_JOB_NODE_INDEX=str(index),
            AWS_BATCH_JOB_NUM_NODES=str(num_nodes),
            AWS_BATCH_JOB_MAIN_NODE_INDEX="0",
            AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS="127.0.0.1",
            TRAINGRID_RENDEZVOUS_PORT=str(self.port),
            TRAINGRID_RENDEZVOUS_BIND="127.0.0.1",
            TRAINGRID_RENDEZVOUS_TIMEOUT="10",
            TRAINGRID_GPUS="2",
            TRAINGRID_NVIDIA_SMI="",
            TRAINGRID_HOSTFILE=str(self.hostfile),
            TRAINGRID_START_SSHD="0",
            PYTHONDONTWRITEBYTECODE="1",
        )
        for key, value in (overrides or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def start(
        self,
        index: int,
        num_nodes: int,
        env: Mapping[str, str | None] | None = None,
        args: Sequence[str] = (),
    ) -> Node:
        log_path = self.tmp_path / f"node{index}.log"
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, *ENTRYPOINT, *args],
                env=self.env(index, num_nodes, env),
                cwd=self.tmp_path,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        node = Node(index, proc, log_path)
        self.nodes.append(node)
        return node

    def start_all(self, num_nodes: int, env: Mapping[str, str | None] | None = None) -> list[Node]:
        """Start the workers first (they retry until the main node listens), then the main."""
        workers = [self.start(i, num_nodes, env) for i in range(num_nodes - 1, 0, -1)]
        return [self.start(0, num_nodes, env), *reversed(workers)]

    def run(
        self,
        index: int,
        num_nodes: int,
        env: Mapping[str, str | None] | None = None,
        args: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """Run one node to completion and capture its output."""
        return subprocess.run(
            [sys.executable, *ENTRYPOINT, *args],
            env=self.env(index, num_nodes, env),
            cwd=self.tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc.poll() is None:
                node.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(timeout=5)


@pytest.fixture
def cluster(tmp_path: Path, free_port: int) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, free_port)
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def fake_bin(tmp_path: Path) -> Callable[[str, str], Path]:
    """Create an executable script in a bin directory; returns the directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)

    def make(name: str, body: str) -> Path:
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\n{body}")
        script.chmod(0o755)
        return bin_dir

    return make


@pytest.fixture
def fake_dev16(tmp_path: Path) -> Path:
    """A /dev with 16 GPUs plus the NVIDIA control devices that are not GPUs."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in [f"nvidia{i}" for i in range(16)] + [
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia-modeset",
        "null",
    ]:
        (dev / name).touch()
    (dev / "nvidia-caps").mkdir()
    return dev


# --- network namespaces (root only): a node's interfaces and a real sshd, in isolation -------

IP = "/usr/sbin/ip"


def _can_make_namespaces() -> bool:
    return os.geteuid() == 0 and Path(IP).exists()


needs_netns = pytest.mark.skipif(
    not _can_make_namespaces(), reason="network namespaces need root and iproute2")


@dataclass
class Netns:
    """A network namespace of this test's own; ``run`` runs a command inside it."""

    name: str

    def ip(self, *args: str) -> None:
        subprocess.run([IP, "-n", self.name, *args], check=True, capture_output=True)

    def prefix(self) -> list[str]:
        return [IP, "netns", "exec", self.name]

    def run(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix(), *command], capture_output=True, text=True,
                              timeout=timeout, check=False)

    def remove(self) -> None:
        """Stop whatever still runs inside (a daemonized sshd), then the namespace."""
        pids = subprocess.run([IP, "netns", "pids", self.name], capture_output=True,
                              text=True, check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        subprocess.run([IP, "netns", "del", self.name], capture_output=True, check=False)


@pytest.fixture
def netns() -> Iterator[Netns]:
    """A namespace laid out like an AWS Batch multi-node container: ``eth0`` with the node's
    address 10.77.0.11/24 (and .10, .12 standing for other hosts), and ``ecs-eth0`` with a
    169.254.172.x link-local address."""
    namespace = Netns(f"tg-test-{os.getpid()}")
    subprocess.run([IP, "netns", "add", namespace.name], check=True, capture_output=True)
    try:
        namespace.ip("link", "set", "lo", "up")
        for device, addresses in (("eth0", ["10.77.0.11/24", "10.77.0.10/24", "10.77.0.12/24"]),
                                  ("ecs-eth0", ["169.254.172.2/22"])):
            # A veth pair whose other end stays here, unaddressed (no dummy devices needed).
            namespace.ip("link", "add", device, "type", "veth", "peer", "name", f"{device}-peer")
            for address in addresses:
                namespace.ip("addr", "add", address, "dev", device)
            namespace.ip("link", "set", f"{device}-peer", "up")
            namespace.ip("link", "set", device, "up")
        yield namespace
    finally:
        namespace.remove()
