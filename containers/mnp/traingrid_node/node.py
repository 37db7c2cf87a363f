"""One node's life: configure, mount, rendezvous, launch, and exit with the launcher's status."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from traingrid_node.config import (
    MPIRUN,
    SSH_READY_TIMEOUT,
    START_GRACE,
    TORCHRUN,
    NodeConfig,
    _get,
    parse_config,
)
from traingrid_node.fabric import check_efa_devices
from traingrid_node.gpus import detect_gpus
from traingrid_node.host import mount_fsx, shared_memory_mib, start_sshd_if_wanted
from traingrid_node.launch import (
    launch_command,
    launcher_env,
    order_members,
    run_launcher,
    write_hostfile,
)
from traingrid_node.network import NodeNetwork, ipv4_interfaces, lone_address, node_network
from traingrid_node.outputs import (
    archive_if_configured,
    export_if_configured,
    preload_if_configured,
)
from traingrid_node.rendezvous import MainConnection, Member, RendezvousServer, registration_message
from traingrid_node.signals import SignalForwarder
from traingrid_node.ssh import authorize, prepare_client
from traingrid_node.status import NetworkError, NodeError, RendezvousError, log, set_log_node


def resolve_main_address(cfg: NodeConfig, server: RendezvousServer | None) -> str:
    """The address the other nodes reach the main node at (first line of the host file): the
    job's TRAINGRID_NODE_ADDRESS, else the local end of the workers' connections, else what
    the environment says, else (one node alone) its default route's source address."""
    if cfg.node_address:
        return cfg.node_address
    seen_by_workers = server.local_address() if server else None
    if seen_by_workers:
        return seen_by_workers
    if cfg.main_address:
        return cfg.main_address
    if cfg.bind_address not in ("", "0.0.0.0"):
        return cfg.bind_address
    return lone_address(ipv4_interfaces())


def check_same_interface(network: NodeNetwork, workers: Sequence[Member]) -> None:
    """mpirun gives every node's daemon the main node's interface name: theirs must match."""
    other = [f"node {m.node_index} ({m.interface})" for m in workers
             if m.interface and m.interface != network.interface]
    if other:
        raise NetworkError(
            f"the main node talks on {network.interface} but {', '.join(other)} on another "
            "interface; mpirun names one interface for every node: set TRAINGRID_INTERFACE")


def prepare_ssh(cfg: NodeConfig, workers: Sequence[Member]) -> tuple[str | None, Path | None]:
    """The job's key pair and mpirun's ssh configuration, when workers run sshd."""
    if cfg.launcher != MPIRUN or cfg.launch_command or not workers:
        return None, None
    keyed = [m for m in workers if m.host_key]
    for member in workers:
        if not member.host_key:
            log(f"node {member.node_index} runs no sshd of the job's: mpirun reaches it only "
                "through an ssh set up otherwise")
    if not keyed:
        return None, None
    job = _get(os.environ, "AWS_BATCH_JOB_ID") or cfg.run_id
    key, config = prepare_client(cfg.ssh_dir, cfg.ssh_port, job,
                                 [(m.address, m.host_key or "") for m in keyed])
    log(f"made the job's ssh key; known_hosts holds the host keys of node(s) "
        f"{', '.join(str(m.node_index) for m in keyed)}")
    return key, config


def log_shared_memory() -> None:
    size = shared_memory_mib()
    log(f"shared memory /dev/shm: {size} MiB" if size is not None else "no /dev/shm")


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
        network = node_network(address, cfg.interface)
        log(f"this node is {network.address} on {network.interface}")
        if cfg.launcher == MPIRUN and not cfg.launch_command and not cfg.interface:
            check_same_interface(network, workers)
        start_sshd_if_wanted(cfg, network.address)
        main = Member(cfg.main_index, address, slots, network.interface)
        members = order_members([main, *workers], cfg.main_index)
        content = write_hostfile(cfg.hostfile, members, cfg.main_index)
        hosts = "; ".join(content.splitlines())
        log(f"all {cfg.num_nodes} node(s) joined; wrote host file {cfg.hostfile}: {hosts}")
        # Before any rank starts: the workers wait for the start message meanwhile.
        preload_if_configured(cfg)
        job_key, ssh_config = prepare_ssh(cfg, workers)
        ranks = {m.node_index: rank for rank, m in enumerate(members)}
        if server is not None:
            server.send_start(ranks, job_key)
            if job_key:
                keyed = [m.node_index for m in workers if m.host_key]
                server.wait_ready(keyed, time.monotonic() + SSH_READY_TIMEOUT, interrupts)
                log(f"node(s) {', '.join(map(str, keyed))} let the job's key in")
            if cfg.launcher == TORCHRUN:
                server.close()  # every node runs its own torchrun from here on
        command = launch_command(
            cfg,
            node_rank=0,
            main_address=address,
            network=network,
            slots=slots,
            total_slots=sum(m.slots for m in members),
            ssh_config=ssh_config,
        )
        env = launcher_env(cfg, 0, address, network)
        status = run_launcher(command, env, interrupts, cfg.kill_grace)
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
        # The address the kernel picked to reach the main node is the one it reaches us at.
        network = node_network(cfg.node_address or conn.local_address(), cfg.interface)
        log(f"this node is {network.address} on {network.interface}")
        host_key = start_sshd_if_wanted(cfg, network.address)
        conn.send(registration_message(cfg, network.address, slots, network.interface, host_key))
        log(f"registered as {network.address} with {slots} slot(s); waiting for the other nodes")
        # The main node preloads the dataset before it sends the start.
        preloading = cfg.preload.timeout if cfg.preload else 0.0
        message = conn.receive(interrupts,
                               time.monotonic() + cfg.timeout + START_GRACE + preloading)
        if message["type"] == "exit":
            return _status_from_main(message)
        if message["type"] != "start":
            raise RendezvousError(f"unexpected {message['type']!r} message from the main node")
        node_rank = message.get("node_rank")
        if isinstance(key := message.get("authorized_key"), str):
            try:
                path = authorize(cfg.ssh_dir, key, conn.peer_address())
            except ValueError as exc:
                raise RendezvousError(f"the main node sent an unusable ssh key: {exc}") from None
            log(f"authorized the job's ssh key from {conn.peer_address()} only ({path})")
            conn.send({"type": "ready"})
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
        cfg, node_rank=node_rank, main_address=cfg.main_address, network=network, slots=slots,
        total_slots=slots,
    )
    env = launcher_env(cfg, node_rank, cfg.main_address, network)
    return run_launcher(command, env, interrupts, cfg.kill_grace)


def run_node(cfg: NodeConfig, slots: int, interrupts: SignalForwarder) -> int:
    mount_fsx(cfg.fsx)
    log_shared_memory()
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
        log(check_efa_devices(cfg, env))
        return run_node(cfg, slots, interrupts)
    except NodeError as exc:
        log(f"{exc.label}: {exc}")
        return exc.exit_code
