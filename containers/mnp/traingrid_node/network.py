"""Which network interface the ranks talk on.

A container of an AWS Batch multi-node job (awsvpc) has ``eth0``, the node's own address on
the job's subnet, and ``ecs-eth0``, a 169.254.x link-local address that reaches the host's ECS
agent and no other node. NCCL, Gloo and Open MPI each pick an interface of their own when not
told, and one that picks ``ecs-eth0`` hangs the job. So the node works out its address (the
one the other nodes reach it at) and the interface that holds it, and names that interface to
every one of them.
"""

from __future__ import annotations

import array
import errno
import fcntl
import ipaddress
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from traingrid_node.status import ConfigError, NetworkError

SIOCGIFCONF = 0x8912
# struct ifreq: a 16-byte name and a 24-byte union on 64-bit Linux (16 on 32-bit).
IFREQ_SIZE = 40 if struct.calcsize("P") == 8 else 32
# Any routable address: a UDP socket "connected" to it sends nothing, and its local end is the
# source address of the default route.
ROUTABLE_PROBE = "192.0.2.1"


@dataclass(frozen=True)
class Interface:
    name: str
    address: str


def ipv4_interfaces() -> list[Interface]:
    """Every IPv4 address of this network namespace and its interface (SIOCGIFCONF)."""
    size = IFREQ_SIZE * 64
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        while True:
            buffer = array.array("B", bytes(size))
            pointer, _ = buffer.buffer_info()
            request = struct.pack("iL", size, pointer)
            length, _ = struct.unpack("iL", fcntl.ioctl(sock.fileno(), SIOCGIFCONF, request))
            if length < size:  # a full buffer may have cut the list short: try a larger one
                break
            size *= 2
    data = buffer.tobytes()[:length]
    found = []
    for offset in range(0, length, IFREQ_SIZE):
        raw_name = data[offset : offset + 16].split(b"\0", 1)[0].decode(errors="replace")
        # A secondary address's label is "eth0:1"; the device is "eth0".
        name = raw_name.split(":", 1)[0]
        found.append(Interface(name, socket.inet_ntoa(data[offset + 20 : offset + 24])))
    return found


def describe(table: Sequence[Interface]) -> str:
    return ", ".join(f"{i.name} {i.address}" for i in table) or "none"


def interface_for(address: str, table: Sequence[Interface]) -> str:
    """The interface that holds ``address``; a NetworkError naming every interface if none."""
    for interface in table:
        if interface.address == address:
            return interface.name
    raise NetworkError(
        f"no network interface holds this node's address {address} (IPv4 interfaces: "
        f"{describe(table)}); set TRAINGRID_INTERFACE to the one the nodes reach each other on")


def source_address_toward(address: str) -> str | None:
    """The local address the kernel picks to reach ``address``; None without a route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((address, 9))
        except OSError as exc:
            if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EINVAL):
                return None
            raise
        return str(sock.getsockname()[0])


def _routable(address: str) -> bool:
    ip = ipaddress.IPv4Address(address)
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified)


def lone_address(table: Sequence[Interface]) -> str:
    """A node that has no other node to reach (a one-node job): the default route's source
    address, else its only routable address."""
    probe = source_address_toward(ROUTABLE_PROBE)
    if probe is not None and _routable(probe):
        return probe
    routable = sorted({i.address for i in table if _routable(i.address)})
    if len(routable) == 1:
        return routable[0]
    raise NetworkError(
        f"cannot tell this node's address: no default route and {len(routable)} routable "
        f"IPv4 addresses (interfaces: {describe(table)}); set TRAINGRID_NODE_ADDRESS")


def check_interface(name: str, table: Sequence[Interface]) -> str:
    """An interface named by the job must exist and carry an IPv4 address."""
    if not any(i.name == name for i in table):
        raise ConfigError(
            f"TRAINGRID_INTERFACE={name} has no IPv4 address on this node (IPv4 interfaces: "
            f"{describe(table)})")
    return name


def choose_interface(
    address: str, configured: str | None, table: Sequence[Interface] | None = None
) -> str:
    """The job's ``TRAINGRID_INTERFACE`` if it names one, else the interface of ``address``."""
    table = ipv4_interfaces() if table is None else table
    if configured:
        return check_interface(configured, table)
    return interface_for(address, table)


@dataclass(frozen=True)
class NodeNetwork:
    """Where this node is: the address the other nodes reach it at, and its interface."""

    address: str
    interface: str


def node_network(address: str, configured: str | None) -> NodeNetwork:
    return NodeNetwork(address, choose_interface(address, configured))
