"""Nodes that look like the containers of an AWS Batch multi-node job, on one machine.

Each node gets a network namespace and a mount namespace of its own (root only):

- ``eth0``, the node's address ``10.20.0.(10 + index)/24``, on a bridge shared by the nodes;
  the bridge sits in a namespace of the rig's own (the machine's own network is not touched);
- ``ecs-eth0``, ``169.254.172.(2 + index)/22``, as the ECS agent's link-local network in an
  awsvpc container: its other end leads nowhere, so a rank that picked it would hang;
- ``/dev/shm``, a tmpfs of the job definition's ``SharedMemorySize``, and ``/run/traingrid``
  (where the node program keeps the job's ssh keys), private to the node.

IPv6 is off on every interface, so a node's ``ecs-eth0`` sends nothing unless something there
uses it: its transmit counter proves the ranks never did. Everything is removed at the end, on
failure and on Ctrl-C too: every process left in the namespaces, then the namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

IP = "ip"
SUBNET, PREFIX = "10.20.0", 24
ECS_SUBNET, ECS_PREFIX = "169.254.172", 22
RUN_DIR = Path("/run/traingrid")  # the node program's default TRAINGRID_SSH_DIR lives here
# Run the command in the node's own mount namespace, with its /dev/shm and /run/traingrid.
MOUNTS = ('mount -t tmpfs -o size="$SHM_MIB"m,mode=1777 shm /dev/shm'
          f' && mount -t tmpfs -o size=16m,mode=755 traingrid {RUN_DIR}')
# Whether a TCP connection reaches a host: "refused" (it answered) or why not.
PROBE = """
import errno, json, socket, sys
def attempt(address):
    try:
        socket.create_connection((address, 9), timeout=5).close()
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timed out"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, type(exc).__name__)
print(json.dumps([attempt(a) for a in sys.argv[1:]]))
"""


class RigError(Exception):
    pass


@dataclass(frozen=True)
class RigNode:
    index: int
    namespace: str
    address: str
    ecs_address: str


def _run(*command: str, check: bool = True) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RigError(f"{' '.join(command)} exited {result.returncode}: "
                       f"{result.stderr.strip()}")
    return result.stdout


class NetnsRig:
    """``with NetnsRig(3, shm_mib=12288) as rig:`` three nodes, gone afterwards."""

    def __init__(self, nodes: int, shm_mib: int, tag: str | None = None) -> None:
        tag = tag or f"tg{os.getpid()}"
        self.fabric = f"{tag}-fabric"
        self.shm_mib = shm_mib
        self.nodes = [RigNode(i, f"{tag}-node{i}", f"{SUBNET}.{10 + i}",
                              f"{ECS_SUBNET}.{2 + i}") for i in range(nodes)]
        self.created: list[str] = []
        self.made_run_dir = False
        self.baseline: dict[int, int] = {}

    def __enter__(self) -> NetnsRig:
        try:
            self.create()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.remove()

    # --- setting up -----------------------------------------------------------------------

    def _namespace(self, name: str) -> None:
        _run(IP, "netns", "add", name)
        self.created.append(name)
        # Before any interface exists: none of them gets IPv6 (nothing sent unasked).
        _run(IP, "netns", "exec", name, "sh", "-c",
             "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; "
             "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6")
        _run(IP, "-n", name, "link", "set", "lo", "up")

    def create(self) -> None:
        problems = []
        if os.geteuid() != 0:
            problems.append("it must run as root (network and mount namespaces)")
        for tool in (IP, "unshare", "mount"):
            if shutil.which(tool) is None:
                problems.append(f"{tool} is not installed")
        if problems:
            raise RigError("cannot build the nodes' namespaces: " + "; ".join(problems))
        if not RUN_DIR.exists():
            RUN_DIR.mkdir(parents=True)
            self.made_run_dir = True
        self._namespace(self.fabric)
        _run(IP, "-n", self.fabric, "link", "add", "br0", "type", "bridge")
        _run(IP, "-n", self.fabric, "link", "set", "br0", "up")
        for node in self.nodes:
            self._namespace(node.namespace)
            port, agent = f"n{node.index}eth", f"n{node.index}ecs"
            _run(IP, "-n", self.fabric, "link", "add", port, "type", "veth", "peer", "name",
                 "eth0", "netns", node.namespace)
            _run(IP, "-n", self.fabric, "link", "set", port, "master", "br0", "up")
            # The agent's end: up, on no bridge and with no address, so it reaches nothing.
            _run(IP, "-n", self.fabric, "link", "add", agent, "type", "veth", "peer", "name",
                 "ecs-eth0", "netns", node.namespace)
            _run(IP, "-n", self.fabric, "link", "set", agent, "up")
            for device, address in (("eth0", f"{node.address}/{PREFIX}"),
                                    ("ecs-eth0", f"{node.ecs_address}/{ECS_PREFIX}")):
                _run(IP, "-n", node.namespace, "addr", "add", address, "dev", device)
                _run(IP, "-n", node.namespace, "link", "set", device, "up")

    # --- running ----------------------------------------------------------------------------

    def command(self, node: RigNode, argv: Sequence[str], prepare: str = "",
                uts: bool = False) -> list[str]:
        """``argv`` inside the node: its network namespace, a mount namespace of its own (and
        a UTS namespace, for a host name of its own, with ``uts``). ``prepare``, a shell
        command, runs there first: the node's own mounts, its host name."""
        script = f"{MOUNTS} && {prepare or ':'} && exec \"$@\""
        return [IP, "netns", "exec", node.namespace, "unshare", "--mount",
                *(["--uts"] if uts else []), "--propagation", "private", "env",
                f"SHM_MIB={self.shm_mib}", "sh", "-c", script, "sh", *argv]

    def probe(self, source: RigNode, *addresses: str) -> list[str]:
        out = _run(IP, "netns", "exec", source.namespace, "python3", "-c", PROBE, *addresses)
        return list(json.loads(out))

    def check_ecs_network_is_isolated(self) -> str:
        """From node 1, node 0's eth0 answers and its ecs-eth0 does not: a rank that picked
        ecs-eth0 could not reach the others. Returns what was seen."""
        if len(self.nodes) < 2:
            return "one node: nothing to reach"
        main, worker = self.nodes[0], self.nodes[1]
        seen = self.probe(worker, main.address, main.ecs_address)
        if seen[0] != "refused" or seen[1] in ("refused", "connected"):
            raise RigError(f"node 1 reached node 0's eth0 as {seen[0]!r} (want 'refused': the "
                           f"host answers) and its ecs-eth0 as {seen[1]!r} (want no answer)")
        return f"node 0's eth0 answers node 1, its ecs-eth0 does not ({seen[1]})"

    def tx_packets(self, node: RigNode, device: str) -> int:
        out = _run(IP, "-n", node.namespace, "-s", "-j", "link", "show", "dev", device)
        return int(json.loads(out)[0]["stats64"]["tx"]["packets"])

    def mark_ecs_counters(self) -> None:
        self.baseline = {n.index: self.tx_packets(n, "ecs-eth0") for n in self.nodes}

    def ecs_packets_since_mark(self) -> dict[int, int]:
        return {n.index: self.tx_packets(n, "ecs-eth0") - self.baseline.get(n.index, 0)
                for n in self.nodes}

    # --- tearing down -------------------------------------------------------------------------

    def _pids(self, namespace: str) -> list[int]:
        out = _run(IP, "netns", "pids", namespace, check=False)
        return [int(pid) for pid in out.split()]

    def stop_processes(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL, whatever still runs in the nodes (sshd daemonizes)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = [pid for ns in self.created for pid in self._pids(ns)]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while pids and time.monotonic() < deadline:
                time.sleep(0.1)
                pids = [pid for ns in self.created for pid in self._pids(ns)]

    def remove(self) -> None:
        self.stop_processes()
        for namespace in reversed(self.created):
            _run(IP, "netns", "del", namespace, check=False)
        self.created.clear()
        if self.made_run_dir:
            with contextlib.suppress(OSError):
                RUN_DIR.rmdir()
            self.made_run_dir = False
