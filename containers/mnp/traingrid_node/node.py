"""One node's life: configure, mount, rendezvous, launch, and exit with the launcher's status."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from traingrid_node.config import MPIRUN, START_GRACE, TORCHRUN, NodeConfig, _get, parse_config
from traingrid_node.fabric import check_efa_devices
from traingrid_node.gpus import detect_gpus
from traingrid_node.host import detect_local_address, mount_fsx, start_sshd
from traingrid_node.launch import (
    launch_command,
    launcher_env,
    order_members,
    run_launcher,
    write_hostfile,
)
from traingrid_node.outputs import archive_if_configured, export_if_configured
from traingrid_node.rendezvous import MainConnection, Member, RendezvousServer, registration_message
from traingrid_node.signals import SignalForwarder
from traingrid_node.status import NodeError, RendezvousError, log, set_log_node


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
        log(check_efa_devices(cfg, env))
        return run_node(cfg, slots, interrupts)
    except NodeError as exc:
        log(f"{exc.label}: {exc}")
        return exc.exit_code
