"""The nodes find each other: workers register (address, slots) with the main node
over TCP, one JSON object per line, and wait for its start and final status."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import selectors
import socket
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from traingrid_node.config import (
    MAX_CONNECT_BACKOFF,
    MAX_MESSAGE_BYTES,
    POLL_INTERVAL,
    PROTOCOL_VERSION,
    SEND_TIMEOUT,
    NodeConfig,
)
from traingrid_node.signals import SignalForwarder
from traingrid_node.ssh import public_key
from traingrid_node.status import (
    EXIT_RENDEZVOUS,
    MainLostError,
    ProtocolError,
    RendezvousError,
    log,
)


@dataclass(frozen=True)
class Member:
    node_index: int
    address: str
    slots: int
    interface: str | None = None  # the interface that holds ``address`` on that node
    host_key: str | None = None  # its sshd's public host key (None: it runs no sshd)


def timeout_message(timeout: float, missing: Sequence[int], num_nodes: int) -> str:
    noun = "node" if len(missing) == 1 else "nodes"
    indices = ", ".join(str(index) for index in missing)
    return f"rendezvous timed out after {timeout:g}s: {noun} {indices} of {num_nodes} never joined"




# --------------------------------------------------------------------------------------------
# Rendezvous protocol: one JSON object per line
#   worker -> main  {"type": "register", "protocol": 2, "node_index", "num_nodes", "address",
#                    "slots", "interface", "host_key"}
#   main -> worker  {"type": "start", "node_rank", "num_nodes", "launcher"[, "authorized_key"]}
#   worker -> main  {"type": "ready"}   (the job's key is authorized; only after one was sent)
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


def registration_message(
    cfg: NodeConfig, address: str, slots: int, interface: str | None = None,
    host_key: str | None = None,
) -> dict[str, Any]:
    return {
        "type": "register",
        "protocol": PROTOCOL_VERSION,
        "node_index": cfg.node_index,
        "num_nodes": cfg.num_nodes,
        "address": address,
        "slots": slots,
        "interface": interface,
        "host_key": host_key,
    }


def _optional_str(message: Mapping[str, Any], key: str, index: int) -> str | None:
    value = message.get(key)
    if value is not None and (not isinstance(value, str) or not value or not value.isprintable()):
        raise ProtocolError(f"node {index} registered an invalid {key} {value!r}")
    return value


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
    return Member(index, address, slots, *_network_fields(message, index, address))


def _network_fields(
    message: Mapping[str, Any], index: int, address: str
) -> tuple[str | None, str | None]:
    """A registration's interface and ssh host key, checked."""
    interface = _optional_str(message, "interface", index)
    if interface is not None and any(c.isspace() for c in interface):
        raise ProtocolError(f"node {index} registered an invalid interface {interface!r}")
    host_key = _optional_str(message, "host_key", index)
    if host_key is not None:
        # It goes into the main node's known_hosts: a key for an IPv4 address, nothing else.
        try:
            ipaddress.IPv4Address(address)
            host_key = public_key(host_key)
        except ValueError as exc:
            raise ProtocolError(
                f"node {index} registered an unusable ssh host key: {exc}") from None
    return interface, host_key


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
    ready: bool = False


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
    def listen(cls, cfg: NodeConfig) -> RendezvousServer:
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

    def gather(self, deadline: float, interrupts: SignalForwarder) -> list[Member]:
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
        peer.buffer += chunk
        while b"\n" in peer.buffer:
            line, _, rest = bytes(peer.buffer).partition(b"\n")
            peer.buffer = bytearray(rest)
            if peer.member is None:
                if not self._register(peer, line):
                    return
            else:
                self._after_registration(peer, line)
        if len(peer.buffer) > MAX_MESSAGE_BYTES:
            self._reject(peer, "message too long")

    def _after_registration(self, peer: _Peer, line: bytes) -> None:
        """Only ``ready`` is expected after the registration; anything else is ignored."""
        with contextlib.suppress(ProtocolError):
            peer.ready = peer.ready or decode_message(line)["type"] == "ready"

    def _register(self, peer: _Peer, line: bytes) -> bool:
        try:
            member = parse_registration(decode_message(line), self.cfg, self.joined, peer.address)
        except ProtocolError as exc:
            self._reject(peer, str(exc))
            return False
        peer.member = member
        self.joined[member.node_index] = peer
        log(
            f"node {member.node_index} joined from {peer.address} as {member.address} with "
            f"{member.slots} slot(s) ({len(self.joined)}/{self.expected} workers)"
        )
        return True

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

    def send_start(self, ranks: Mapping[int, int], authorized_key: str | None = None) -> None:
        """Start every worker; those with sshd also get the job's key to authorize."""
        for index, peer in sorted(self.joined.items()):
            message: dict[str, Any] = {
                "type": "start",
                "node_rank": ranks[index],
                "num_nodes": self.cfg.num_nodes,
                "launcher": self.cfg.launcher,
            }
            if authorized_key and peer.member is not None and peer.member.host_key:
                message["authorized_key"] = authorized_key
            self._send(peer, message)

    def wait_ready(self, indices: Collection[int], deadline: float,
                   interrupts: SignalForwarder) -> None:
        """Wait until the workers ``indices`` answered ``ready`` (their sshd lets the job's key
        in); RendezvousError naming those that did not, or that left."""
        while True:
            interrupts.check()
            gone = sorted(i for i in indices if i not in self.joined)
            if gone:
                raise RendezvousError(
                    f"node(s) {', '.join(map(str, gone))} left before authorizing the job's key")
            waiting = sorted(i for i in indices if not self.joined[i].ready)
            if not waiting:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RendezvousError(
                    f"node(s) {', '.join(map(str, waiting))} did not authorize the job's ssh "
                    "key in time")
            for key, _ in self.selector.select(min(remaining, POLL_INTERVAL)):
                if key.data is not None:
                    self._read(key.data)

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
        cls, host: str, port: int, timeout: float, interrupts: SignalForwarder
    ) -> MainConnection:
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

    def peer_address(self) -> str:
        return str(self.sock.getpeername()[0])

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            self.sock.sendall(encode_message(message))
        except OSError as exc:
            raise MainLostError(f"cannot send to the main node: {exc}") from None

    def receive(self, interrupts: SignalForwarder, deadline: float | None = None) -> dict[str, Any]:
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
