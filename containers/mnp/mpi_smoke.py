"""``make mpi-smoke NODES=N``: N node entrypoints on this machine, one real ``mpirun``.

Each node is ``python3 -m traingrid_node`` with the variables AWS Batch sets, on its own
loopback address (127.0.0.1, .2, ...): they rendezvous, the main node writes the host file and
runs the same mpirun line as on AWS, and Open MPI starts the "remote" nodes' daemons through a
remote-shell agent that runs them here instead of over ssh. The ranks run the trainer's
``--synthetic`` mode on the CPU (Gloo) for a few steps. The last line printed is one JSON object
(nodes, world_size, images_per_s, allreduce_ok, ...). ``FAIL_RANK=K`` makes rank K exit 3: the
smoke then exits 3 and names the rank.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from traingrid_node.metrics import METRICS_FILE, problems

HERE = Path(__file__).resolve().parent
# The agent Open MPI runs instead of ssh: drop the host name, run the daemon's command here.
LOCAL_AGENT = '#!/bin/sh\nshift\nexec /bin/sh -c "$*"\n'
FAILED_RANK = re.compile(r"failing as asked \(--fail_rank (\d+)\)|rank (\d+) with PID")


def say(message: str) -> None:
    print(f"mpi-smoke: {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def open_mpi_version(mpirun: str) -> str:
    out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"\(Open MPI\) (\S+)", out.stdout)
    return match.group(1) if match else out.stdout.splitlines()[0]


def node_env(index: int, nodes: int, work: Path, agent: Path, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "AWS_BATCH_JOB_ID": "mpi-smoke",
        "AWS_BATCH_JOB_NUM_NODES": str(nodes),
        "AWS_BATCH_JOB_NODE_INDEX": str(index),
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
        "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "127.0.0.1",
        "TRAINGRID_NODE_ADDRESS": f"127.0.0.{index + 1}",
        "TRAINGRID_RENDEZVOUS_PORT": str(port),
        "TRAINGRID_RENDEZVOUS_BIND": "127.0.0.1",
        "TRAINGRID_RENDEZVOUS_TIMEOUT": "120",
        "TRAINGRID_GPUS": "0",  # a CPU node: one slot
        "TRAINGRID_START_SSHD": "0",
        "TRAINGRID_HOSTFILE": str(work / "hostfile"),
        "TRAINGRID_INTERFACE": "lo",
        "NCCL_SOCKET_IFNAME": "lo",
        "MPI_GPUS": str(nodes),
        "OUTPUT_DIR": str(work / "output"),
        "PYTHONPATH": str(HERE),
        # As on AWS but for the loopback: the agent instead of ssh, Gloo on lo, and the
        # daemons' own traffic on lo too.
        "EXTRA_MPI_PARAMS": f"--mca plm_rsh_agent {agent} --mca oob_tcp_if_include lo "
                            "-x GLOO_SOCKET_IFNAME=lo -x OMP_NUM_THREADS=1",
        "GLOO_SOCKET_IFNAME": "lo",
    })
    return env


def stop(processes: list[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    """SIGTERM each node's process group (the entrypoint stops mpirun and its daemons), then
    SIGKILL what is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.poll() is None for p in processes):
            time.sleep(0.1)


def train_command(args: argparse.Namespace) -> list[str]:
    command = [sys.executable, "-m", "traingrid_trainer", "--synthetic", "--num_epochs", "1",
               "--warmup_epochs", "0", "--steps_per_epoch", str(args.steps), "--batch_size",
               str(args.batch_size), "--image_size", str(args.image_size), "--log_every", "1",
               "--loader_workers", "0"]
    if args.fail_rank is not None:
        command += ["--fail_rank", str(args.fail_rank)]
    return command


def run(args: argparse.Namespace, work: Path) -> int:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        say("mpirun is not installed (make openmpi installs Debian's openmpi-bin)")
        return 127
    version = open_mpi_version(mpirun)
    agent = work / "local-agent"
    agent.write_text(LOCAL_AGENT)
    agent.chmod(0o755)
    port, started = free_port(), time.monotonic()
    say(f"{args.nodes} node(s), Open MPI {version}, work directory {work}")
    nodes = []
    for index in range(args.nodes):
        log = (work / f"node-{index}.log").open("w")
        nodes.append((subprocess.Popen(
            [sys.executable, "-m", "traingrid_node", *train_command(args)],
            env=node_env(index, args.nodes, work, agent, port), stdout=log,
            stderr=subprocess.STDOUT, cwd=work, start_new_session=True), log))
    statuses = []
    deadline = started + args.timeout
    for index, (process, log) in enumerate(nodes):
        try:
            statuses.append(process.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            say(f"node {index} still running after {args.timeout:g}s; stopping every node")
            stop([process for process, _ in nodes])
            statuses.append(124)
        log.close()
        say(f"node {index} exited {statuses[-1]}")
    logs = "".join((work / f"node-{i}.log").read_text() for i in range(args.nodes))
    if args.verbose or statuses[0]:
        sys.stderr.write(logs)
    if statuses[0]:
        ranks = sorted({int(a or b) for a, b in FAILED_RANK.findall(logs)})
        which = f"rank {', '.join(map(str, ranks))}" if ranks else "a rank"
        say(f"failed: {which} exited; mpirun and the main node exited {statuses[0]}")
        return statuses[0]
    metrics = json.loads((work / "output" / METRICS_FILE).read_text())
    wrong = problems(metrics)
    if wrong:
        say(f"metrics.json breaks its contract: {'; '.join(wrong)}")
        return 1
    print(json.dumps({
        "nodes": args.nodes,
        "world_size": metrics["world_size"],
        "images_per_s": metrics["images_per_second"],
        "images_per_s_per_rank": metrics["images_per_second_per_gpu"],
        "allreduce_ok": metrics["allreduce_ok"],
        "steps": metrics["steps"],
        "open_mpi": version,
        "seconds": round(time.monotonic() - started, 1),
    }))
    return 0 if metrics["allreduce_ok"] and metrics["world_size"] == args.nodes else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=int(os.environ.get("NODES", "3")))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=600)
    raw_fail = os.environ.get("FAIL_RANK", "").strip()
    parser.add_argument("--fail-rank", type=int, default=int(raw_fail) if raw_fail else None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--verbose", action="store_true", help="print the nodes' logs")
    args = parser.parse_args()
    if args.nodes < 1 or args.nodes > 254:
        parser.error("--nodes must be between 1 and 254")
    work = Path(tempfile.mkdtemp(prefix="traingrid-mpi-smoke-"))
    try:
        return run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
