"""The launcher: the MPI host file, the mpirun and torchrun command lines, and running
the launcher with signals forwarded to its process group."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from traingrid_node.config import (
    FORWARDED_PREFIXES,
    FORWARDED_VARIABLES,
    POLL_INTERVAL,
    TORCHRUN,
    TORCHRUN_LAST_CALL_S,
    NodeConfig,
)
from traingrid_node.fabric import fabric_environment
from traingrid_node.network import NodeNetwork
from traingrid_node.rendezvous import Member
from traingrid_node.signals import SignalForwarder
from traingrid_node.status import (
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    exit_status,
    log,
    signal_name,
)
from traingrid_node.verdict import VERDICT_VARIABLE, clear, read, verdict_path

# The variables that tell NCCL and Gloo which interface to use (the node sets both).
SOCKET_INTERFACE_VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def order_members(members: Collection[Member], main_index: int) -> list[Member]:
    """Main node first, then the others by node index."""
    return sorted(members, key=lambda m: (m.node_index != main_index, m.node_index))


def render_hostfile(members: Collection[Member], main_index: int) -> str:
    return "".join(f"{m.address} slots={m.slots}\n" for m in order_members(members, main_index))


# MCA parameters the node sets, and those that would conflict with each one: Open MPI refuses
# a parameter named twice on its command line, and an include list beside an exclude list.
NODE_MCA_PARAMETERS = {
    "plm_rsh_agent": ("plm_rsh_agent",),
    "btl_tcp_if_include": ("btl_tcp_if_include", "btl_tcp_if_exclude"),
    "oob_tcp_if_include": ("oob_tcp_if_include", "oob_tcp_if_exclude"),
}
MCA_OPTIONS = ("--mca", "-mca", "--gmca", "-gmca")


def mca_parameters_named(arguments: Sequence[str]) -> set[str]:
    """The MCA parameters set in an mpirun argument list (``--mca NAME VALUE``)."""
    return {arguments[i + 1] for i, arg in enumerate(arguments[:-1]) if arg in MCA_OPTIONS}


def ssh_agent(ssh_config: Path | str) -> str:
    """How mpirun starts its daemons on the other nodes: ssh with the job's own client
    configuration (its key, the workers' host keys), not the user's."""
    return f"ssh -F {ssh_config}"


def build_mpirun_command(
    *,
    hostfile: Path | str,
    num_processes: int,
    train_command: Sequence[str],
    interface: str,
    nccl_socket_ifname: str | None = None,
    gloo_socket_ifname: str | None = None,
    ssh_config: Path | str | None = None,
    forwarded: Sequence[str] = (),
    extra_mpi_params: Sequence[str] = (),
) -> list[str]:
    """The seed's mpirun line, for the Open MPI 4.1 the image ships (``make mpi-smoke`` runs it).

    Options are spelled with two dashes (``--bind-to``, ``--mca``), which Open MPI 4.1 takes
    and 5.x requires (5.x refuses the seed's ``-bind-to socket``). The main node starts every
    node's daemon itself (``plm_rsh_no_tree_spawn``: only it holds the job's ssh key), through
    ssh with the job's configuration (``ssh_config``). Every channel stays on ``interface``, the
    one that holds the node's address: MPI's messages (``btl_tcp``), its daemons' own traffic
    (``oob_tcp``), NCCL's and Gloo's sockets (unless the job names its own). ``forwarded``
    names variables of this node's environment that every rank needs (``-x NAME``: ranks on
    other nodes are started through ssh, which does not carry the job's environment).
    ``extra_mpi_params`` that set one of these MCA parameters replace the node's.
    """
    forward = [arg for name in forwarded for arg in ("-x", name)]
    named = mca_parameters_named(extra_mpi_params)
    wanted = {"btl_tcp_if_include": interface, "oob_tcp_if_include": interface}
    if ssh_config is not None:
        wanted["plm_rsh_agent"] = ssh_agent(ssh_config)
    mca = [
        arg
        for name, value in wanted.items()
        if named.isdisjoint(NODE_MCA_PARAMETERS[name])
        for arg in ("--mca", name, value)
    ]
    return [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        str(num_processes),
        "--hostfile",
        str(hostfile),
        "--mca",
        "plm_rsh_no_tree_spawn",
        "1",
        "--bind-to",
        "socket",
        "--map-by",
        "slot",
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl",
        "^openib",
        *mca,
        "-x",
        f"NCCL_SOCKET_IFNAME={nccl_socket_ifname or interface}",
        "-x",
        f"GLOO_SOCKET_IFNAME={gloo_socket_ifname or interface}",
        "-x",
        "LD_LIBRARY_PATH",
        "-x",
        "PATH",
        *forward,
        *extra_mpi_params,
        *train_command,
    ]


def forwarded_variables(env: Mapping[str, str]) -> list[str]:
    """The job's variables the ranks read, and the fabric's (``FI_*``, ``NCCL_*``), as set
    on this node; ``NCCL_SOCKET_IFNAME`` and ``GLOO_SOCKET_IFNAME`` are passed with their
    values already."""
    names = [name for name in FORWARDED_VARIABLES if name in env]
    fabric = sorted(name for name in env if name.startswith(FORWARDED_PREFIXES)
                    and name not in SOCKET_INTERFACE_VARIABLES)
    return names + fabric


def build_torchrun_command(
    *,
    min_nodes: int,
    max_nodes: int,
    nproc_per_node: int,
    main_address: str,
    local_address: str,
    port: int,
    run_id: str,
    is_main: bool,
    max_restarts: int,
    train_command: Sequence[str],
) -> list[str]:
    """Elastic torchrun: a c10d rendezvous hosted by the main node's agent, ``MIN:MAX`` nodes.

    A node that fails or leaves does not end the job: the agents stop their workers, meet
    again with the nodes that are left (at least ``min_nodes``) or that came back, and restart
    the workers from their last checkpoint, up to ``max_restarts`` times. Ranks are given out by
    the rendezvous, not by node index. The main node hosts the rendezvous store
    (``is_host``), so it does not depend on hostnames resolving inside containers; each agent
    gives the others its node's own address (``--local-addr``), not whatever its host name
    resolves to. Once ``min_nodes`` have met, the rendezvous waits ``TORCHRUN_LAST_CALL_S`` (not
    torchrun's 30 s) for the others: after a lost node, the nodes left go on that much sooner.

    A command whose first word is a ``.py`` script is handed to torchrun as is (torchrun runs it
    with Python); anything else (``python -u train.py``, a shell script...) runs with
    ``--no-python``.
    """
    command = [
        "torchrun",
        f"--nnodes={min_nodes}:{max_nodes}",
        f"--nproc-per-node={nproc_per_node}",
        f"--max-restarts={max_restarts}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={main_address}:{port}",
        f"--local-addr={local_address}",
        f"--rdzv-id={run_id}",
        f"--rdzv-conf=is_host={'true' if is_main else 'false'},"
        f"last_call_timeout={TORCHRUN_LAST_CALL_S:g}",
    ]
    if train_command and not train_command[0].endswith(".py"):
        command.append("--no-python")
    return [*command, *train_command]


def run_launcher(
    command: Sequence[str],
    env: Mapping[str, str],
    interrupts: SignalForwarder,
    kill_grace: float,
) -> int:
    """Run the launcher in its own process group and return its exit status."""
    interrupts.check()
    verdict = Path(env[VERDICT_VARIABLE]) if env.get(VERDICT_VARIABLE) else None
    if verdict is not None:
        clear(verdict)
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
        returncode = _wait_for_launcher(proc, interrupts, kill_grace, verdict)
    finally:
        interrupts.detach()
    if (ended := read(verdict)) is not None:
        log(f"the trainer's watchdog ended the job: {ended[1]} (status {ended[0]})")
        return ended[0]
    status = exit_status(returncode)
    if returncode < 0:
        log(f"launcher was killed by {signal_name(-returncode)} (status {status})")
    else:
        log(f"launcher exited with status {status}")
    return status


def _wait_for_launcher(
    proc: subprocess.Popen[bytes], interrupts: SignalForwarder, kill_grace: float,
    verdict: Path | None = None,
) -> int:
    killed = stopping = False
    while True:
        try:
            return proc.wait(timeout=POLL_INTERVAL * 5)
        except subprocess.TimeoutExpired:
            pass
        if not stopping and verdict is not None and verdict.exists():
            # The watchdog's verdict: stop every rank now (torchrun would restart them).
            log("the trainer's watchdog left a verdict; stopping the launcher")
            interrupts.stop_launcher()
            stopping = True
        if not killed and interrupts.kill_due(kill_grace):
            log(f"launcher still running {kill_grace:g}s after the signal; sending SIGKILL")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            killed = True




def write_hostfile(path: Path, members: Collection[Member], main_index: int) -> str:
    content = render_hostfile(members, main_index)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content)
    tmp.replace(path)
    return content




def socket_interfaces(cfg: NodeConfig, network: NodeNetwork) -> dict[str, str]:
    """NCCL's and Gloo's interface: the job's own setting, else the node's."""
    return {
        "NCCL_SOCKET_IFNAME": cfg.nccl_socket_ifname or network.interface,
        "GLOO_SOCKET_IFNAME": cfg.gloo_socket_ifname or network.interface,
    }


def launcher_env(
    cfg: NodeConfig, node_rank: int, main_address: str, network: NodeNetwork
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(fabric_environment(cfg, env))
    env.update(socket_interfaces(cfg, network))
    env.update(
        TRAINGRID_NODE_RANK=str(node_rank),
        TRAINGRID_NUM_NODES=str(cfg.num_nodes),
        TRAINGRID_MAIN_ADDRESS=main_address,
        TRAINGRID_NODE_ADDRESS=network.address,
        TRAINGRID_INTERFACE=network.interface,
    )
    if cfg.launcher == TORCHRUN:
        # Each rendezvous round's rank 0 hosts the ranks' store on a port of its own, rather
        # than every round sharing the agent's, keyed by each agent's own restart count: after
        # a lost node one agent restarts for the failure, another for the changed membership,
        # their counts differ, and the restarted ranks read the dead round's addresses.
        env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    if cfg.is_main:
        env["TRAINGRID_HOSTFILE"] = str(cfg.hostfile)
        # Where the trainer's watchdog, on this node, leaves its verdict (traingrid_node.verdict).
        env[VERDICT_VARIABLE] = str(verdict_path(cfg.hostfile))
    return env


def launch_command(
    cfg: NodeConfig,
    *,
    node_rank: int,
    main_address: str,
    network: NodeNetwork,
    slots: int,
    total_slots: int,
    ssh_config: Path | None = None,
) -> list[str]:
    if cfg.launch_command:
        return list(cfg.launch_command)
    if cfg.launcher == TORCHRUN:
        return build_torchrun_command(
            min_nodes=cfg.min_nodes or cfg.num_nodes,
            max_nodes=cfg.num_nodes,
            nproc_per_node=slots,
            main_address=main_address,
            local_address=network.address,
            port=cfg.torchrun_port,
            run_id=cfg.run_id,
            is_main=cfg.is_main,
            max_restarts=cfg.max_restarts,
            train_command=cfg.train_command,
        )
    num_processes = cfg.mpi_gpus or total_slots
    if num_processes > total_slots:
        log(f"MPI_GPUS={num_processes} exceeds the {total_slots} slot(s) in the host file")
    interfaces = socket_interfaces(cfg, network)
    return build_mpirun_command(
        hostfile=cfg.hostfile,
        num_processes=num_processes,
        train_command=cfg.train_command,
        interface=network.interface,
        nccl_socket_ifname=interfaces["NCCL_SOCKET_IFNAME"],
        gloo_socket_ifname=interfaces["GLOO_SOCKET_IFNAME"],
        ssh_config=ssh_config,
        forwarded=forwarded_variables(launcher_env(cfg, node_rank, main_address, network)),
        extra_mpi_params=cfg.extra_mpi_params,
    )
