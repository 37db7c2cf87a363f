"""``make mpi-smoke NODES=N``: N nodes laid out like AWS Batch multi-node containers on this
machine, the real ``sshd``/``ssh`` between them, one real ``mpirun``.

Each node is ``python3 -m traingrid_node`` in a network and mount namespace of its own
(``netns_rig``: ``eth0`` on a shared bridge, the ECS agent's link-local ``ecs-eth0``, the job
definition's ``/dev/shm``), with the environment AWS Batch gives the job's containers: the job
definition's and the state machine's overrides for a small plan (``smoke_job.py``, ``--job``),
and the ``AWS_BATCH_*`` variables (the main node's address on the workers only). The node
program finds its address and interface itself, makes the job's ssh keys, rendezvouses, and the
main node's mpirun starts the workers' ranks through their sshd with the host keys checked.

Two jobs run: the trainer's ``--synthetic`` mode (64 pixels, a few steps), then real JPEG
TFRecords at 224 pixels with the trainer's default data loader workers (which hand their
batches over through ``/dev/shm``), batch and epochs from the job's environment. The last line
printed is one JSON object (nodes, world_size, images_per_s, allreduce_ok, ..., rig, shm_mib).
``FAIL_RANK=K`` makes rank K exit 3: the smoke then exits 3 and names the rank. Every rank
runs the trainer's pre-flight check first (the plan's ``TRAINGRID_PREFLIGHT``);
``SLOW_RANK=K`` slows rank K's training steps tenfold: its check then names that node and rank
with its figure, and the smoke exits 75 as the job would. ``LOSE_NODE=K`` takes node K away
mid-training and ``HANG_RANK=K`` makes rank K stop stepping instead (``smoke_faults``: the run
recovers on the nodes left; the watchdog ends the job with 71, naming the rank).

What the rig changes in the job's environment, because this machine is not AWS: ``JOB_DIR``
(the sample shards), ``OUTPUT_DIR`` and the host file (the work directory), no
``TRAINGRID_EXPORT_DIR`` (no Lustre), ``MPI_GPUS`` (CPU nodes: one slot each), one OpenMP
thread per rank, the rendezvous timeout, the collective timeout (300 s: on a busy two-core
machine a step of ResNet-50 at 224 px and rank 0's checkpoint take many times an instance's,
and a collective waiting past 60 s there is load, not a lost peer; the fault runs set their
own), and the pre-flight check's thresholds: the ranks against each other only (a CPU is far
below the instance type's GPU floors), a small budget.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import smoke_faults
from netns_rig import NetnsRig, RigError
from sample_data import write_shards

from traingrid_node.metrics import METRICS_FILE, problems
from traingrid_node.preflight import PREFLIGHT_FILE
from traingrid_node.status import EXIT_PREFLIGHT

HERE = Path(__file__).resolve().parent
PREFLIGHT = re.compile(r"pre-flight check failed: ([^\n]*?); exiting")
# The rig's CPU ranks judged against each other only, with a small all-reduce and read probe.
# The rig's nodes share one machine with whatever else runs on it: a rank judged slow is
# measured again more often than on AWS, where a node has its machine to itself.
RIG_PREFLIGHT = {"steps": 2, "allreduce_mib": 4, "read_mb": 16, "seconds": 60, "repeats": 4}
RIG_COLLECTIVE_TIMEOUT_S = "300"  # the fault runs set 20 s (smoke_faults.FAULT_ENV)
FAILED_RANK = re.compile(r"failing as asked \(--fail_rank (\d+)\)|rank (\d+) with PID")
SHARED_MEMORY = re.compile(r"\[traingrid node 0\] shared memory /dev/shm: (\d+) MiB")
INTERFACE = re.compile(r"\[traingrid node 0\] this node is (\S+) on (\S+)")
SHARDS_PER_RANK = 4  # as many as the trainer's default loader workers, so each has one


def say(message: str) -> None:
    print(f"mpi-smoke: {message}", file=sys.stderr, flush=True)


def open_mpi_version(mpirun: str) -> str:
    out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"\(Open MPI\) (\S+)", out.stdout)
    return match.group(1) if match else out.stdout.splitlines()[0]


def load_job(path: Path) -> dict[str, Any]:
    try:
        job = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"mpi-smoke: cannot read the job from {path} ({exc}); make mpi-smoke "
                         "writes it with containers/mnp/smoke_job.py") from None
    missing = [k for k in ("environment", "command", "shm_mib") if k not in job]
    if missing:
        raise SystemExit(f"mpi-smoke: the job in {path} has no {', '.join(missing)}")
    return dict(job)


def default_loader_workers() -> int:
    from traingrid_trainer.config import parser

    return int(parser({}).get_default("loader_workers"))


def node_env(job: dict[str, Any], index: int, nodes: int, run: Path,
             main_address: str, data: Path, slow_rank: int | None = None) -> dict[str, str]:
    """What AWS Batch gives node ``index``: the image's variables, the job's, its own."""
    env = {
        # The image's ENV (containers/mnp/Dockerfile), with this machine's Python first.
        "PATH": f"{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                "/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(HERE),
        "OMPI_MCA_plm_rsh_agent": "ssh",
        "LD_LIBRARY_PATH": "/opt/aws-ofi-nccl/lib:/opt/amazon/efa/lib",
    }
    env.update(job["environment"])
    env.update({
        "AWS_BATCH_JOB_ID": f"mpi-smoke-{run.name}",
        "AWS_BATCH_JOB_ATTEMPT": "1",
        "AWS_BATCH_JOB_NUM_NODES": str(nodes),
        "AWS_BATCH_JOB_NODE_INDEX": str(index),
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
    })
    if index != 0:  # Batch tells the workers only
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = main_address
    # This machine is not AWS (the module's docstring lists why).
    env.pop("TRAINGRID_EXPORT_DIR", None)
    env.update({
        "JOB_DIR": str(data),
        "OUTPUT_DIR": str(run / "output"),
        "TRAINGRID_HOSTFILE": str(run / "hostfile"),
        "MPI_GPUS": str(nodes),
        "TRAINGRID_GPUS": "0",  # a CPU node: one slot
        "TRAINGRID_RENDEZVOUS_TIMEOUT": "120",
        "TRAINGRID_COLLECTIVE_TIMEOUT_S": RIG_COLLECTIVE_TIMEOUT_S,
        "TRAINGRID_PREFLIGHT": json.dumps(RIG_PREFLIGHT),
        "EXTRA_MPI_PARAMS": f"{env.get('EXTRA_MPI_PARAMS', '')} -x OMP_NUM_THREADS=1".strip(),
    })
    if slow_rank is not None:
        env["TRAINGRID_PREFLIGHT_SLOW_RANK"] = str(slow_rank)
    return env


def run_job(rig: NetnsRig, job: dict[str, Any], run: Path, data: Path, trainer_args: list[str],
            timeout: float, slow_rank: int | None = None) -> tuple[int, str]:
    """One job on every node; returns the main node's status and every node's log. Whatever
    the nodes leave running (sshd) is stopped, as when a job's containers end."""
    run.mkdir(parents=True)
    nodes, started = [], time.monotonic()
    command = [sys.executable, "-m", "traingrid_node", *job["command"], *trainer_args]
    try:
        for node in rig.nodes:
            env = node_env(job, node.index, len(rig.nodes), run, rig.nodes[0].address, data,
                           slow_rank)
            with (run / f"node-{node.index}.log").open("w") as log:
                nodes.append(subprocess.Popen(rig.command(node, command), env=env, stdout=log,
                                              stderr=subprocess.STDOUT, cwd=run,
                                              start_new_session=True))
        statuses = []
        for index, process in enumerate(nodes):
            try:
                statuses.append(process.wait(timeout=max(1.0, started + timeout
                                                         - time.monotonic())))
            except subprocess.TimeoutExpired:
                say(f"{run.name}: node {index} still running after {timeout:g}s; stopping it")
                rig.stop_processes()
                statuses.append(process.wait())
                statuses[-1] = 124
            say(f"{run.name}: node {index} exited {statuses[-1]}")
    finally:
        rig.stop_processes()
    logs = "".join((run / f"node-{i}.log").read_text() for i in range(len(rig.nodes)))
    return statuses[0], logs


def metrics_of(run: Path) -> dict[str, Any]:
    metrics = dict(json.loads((run / "output" / METRICS_FILE).read_text()))
    wrong = problems(metrics)
    if wrong:
        raise RigError(f"{run.name}: metrics.json breaks its contract: {'; '.join(wrong)}")
    return metrics


def preflight_of(run: Path) -> dict[str, Any] | None:
    """The pre-flight check's summary from the job's preflight.json, if it ran."""
    path = run / "output" / PREFLIGHT_FILE
    if not path.exists():
        return None
    document = json.loads(path.read_text())
    return {key: document[key] for key in ("passed", "median_images_per_s",
                                           "allreduce_bus_gb_s", "seconds")}


def failed(status: int, logs: str, name: str) -> int:
    sys.stderr.write(logs)
    if status == EXIT_PREFLIGHT and (verdict := PREFLIGHT.search(logs)):
        say(f"{name} failed its pre-flight check: {verdict.group(1)}; mpirun and the main node "
            f"exited {status}")
        return status
    ranks = sorted({int(a or b) for a, b in FAILED_RANK.findall(logs)})
    which = f"rank {', '.join(map(str, ranks))}" if ranks else "a rank"
    say(f"{name} failed: {which} exited; mpirun and the main node exited {status}")
    return status


def check(job: dict[str, Any], nodes: int, shm_mib: int | None, ecs: dict[int, int],
          runs: dict[str, dict[str, Any]]) -> list[str]:
    """What is wrong with the jobs' results, all of it."""
    wrong = []
    if shm_mib != job["shm_mib"]:
        wrong.append(f"the main node's /dev/shm is {shm_mib} MiB, the job definition's "
                     f"{job['shm_mib']}")
    if any(ecs.values()):
        wrong.append(f"ecs-eth0 sent packets during the jobs (by node: {ecs})")
    for name, metrics in runs.items():
        if not metrics["allreduce_ok"] or metrics["world_size"] != nodes:
            wrong.append(f"{name}: world of {metrics['world_size']}, all-reduce "
                         f"{'ok' if metrics['allreduce_ok'] else 'wrong'}")
    return wrong


def smoke(args: argparse.Namespace, rig: NetnsRig, job: dict[str, Any], work: Path,
          version: str) -> int:
    started = time.monotonic()
    say(rig.check_ecs_network_is_isolated())
    data = work / "data"
    nodes = len(rig.nodes)
    write_shards(data, "train-{:05d}-of-{:05d}", SHARDS_PER_RANK * nodes, 4, size=(256, 192))
    write_shards(data, "validation-{:05d}-of-{:05d}", nodes, 2, size=(256, 192))
    rig.mark_ecs_counters()
    if args.lose_node is not None:
        return smoke_faults.lose_node(args, rig, job, work, data, node_env, metrics_of)
    if args.hang_rank is not None:
        return smoke_faults.hang(args, rig, job, work, data, node_env)

    synthetic = ["--synthetic", "--steps_per_epoch", str(args.steps), "--batch_size",
                 str(args.batch_size), "--image_size", str(args.image_size), "--log_every", "1",
                 "--loader_workers", "0"]
    if args.fail_rank is not None:
        synthetic += ["--fail_rank", str(args.fail_rank)]
    status, logs = run_job(rig, job, work / "synthetic", data, synthetic, args.timeout,
                           args.slow_rank)
    if args.verbose:
        sys.stderr.write(logs)
    if status:
        return failed(status, logs, "synthetic")
    first = metrics_of(work / "synthetic")
    shm = SHARED_MEMORY.search(logs)
    network = INTERFACE.search(logs)

    # Real JPEGs at the trainer's defaults (224 pixels, its loader workers); batch and epochs
    # from the job's environment.
    status, logs = run_job(rig, job, work / "tfrecords", data,
                           ["--steps_per_epoch", str(args.steps), "--log_every", "1"],
                           args.timeout)
    if args.verbose:
        sys.stderr.write(logs)
    if status:
        return failed(status, logs, "tfrecords")
    second = metrics_of(work / "tfrecords")

    ecs = rig.ecs_packets_since_mark()
    shm_mib = int(shm.group(1)) if shm else None
    wrong = check(job, nodes, shm_mib, ecs, {"synthetic": first, "tfrecords": second})
    if wrong:
        say("failed: " + "; ".join(wrong))
        return 1
    print(json.dumps({
        "nodes": nodes,
        "world_size": first["world_size"],
        "images_per_s": first["images_per_second"],
        "images_per_s_per_rank": first["images_per_second_per_gpu"],
        "allreduce_ok": first["allreduce_ok"],
        "steps": first["steps"],
        "open_mpi": version,
        "seconds": round(time.monotonic() - started, 1),
        "tfrecords": {
            "images_per_s": second["images_per_second"],
            "steps": second["steps"],
            "global_batch": second["global_batch"],
            "image_size": 224,
            "loader_workers": default_loader_workers(),
            "top1_accuracy": second["top1_accuracy"],
        },
        "interface": network.group(2) if network else None,
        "ecs_eth0_tx_packets": sum(ecs.values()),
        "rig": "netns",
        "shm_mib": shm_mib,
        "preflight": preflight_of(work / "synthetic"),
    }))
    return 0


def missing_tools() -> list[str]:
    wanted = {"mpirun": "make openmpi installs Debian's openmpi-bin",
              "/usr/sbin/sshd": "make sshd installs Debian's openssh-server",
              "ssh": "make sshd installs Debian's openssh-client",
              "ssh-keygen": "make sshd installs Debian's openssh-client"}
    return [f"{tool} is not installed ({how})" for tool, how in wanted.items()
            if shutil.which(tool) is None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=int(os.environ.get("NODES", "3")))
    parser.add_argument("--job", type=Path, required=True,
                        help="the job as smoke_job.py prints it (JSON)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4, help="of the synthetic run")
    parser.add_argument("--image-size", type=int, default=64, help="of the synthetic run")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per job")
    raw_fail = os.environ.get("FAIL_RANK", "").strip()
    parser.add_argument("--fail-rank", type=int, default=int(raw_fail) if raw_fail else None)
    raw_slow = os.environ.get("SLOW_RANK", "").strip()
    parser.add_argument("--slow-rank", type=int, default=int(raw_slow) if raw_slow else None,
                        help="slow this rank's training steps: its pre-flight check fails")
    raw_lose = os.environ.get("LOSE_NODE", "").strip()
    parser.add_argument("--lose-node", type=int, default=int(raw_lose) if raw_lose else None,
                        help="take this worker node away mid-training: the others go on")
    raw_hang = os.environ.get("HANG_RANK", "").strip()
    parser.add_argument("--hang-rank", type=int, default=int(raw_hang) if raw_hang else None,
                        help="this rank stops stepping: the watchdog ends the job (71)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--verbose", action="store_true", help="print the nodes' logs")
    args = parser.parse_args()
    if args.nodes < 1 or args.nodes > 200:
        parser.error("--nodes must be between 1 and 200")
    job = load_job(args.job)
    if missing := missing_tools():
        say("; ".join(missing))
        return 127
    mpirun = shutil.which("mpirun")
    assert mpirun is not None
    version = open_mpi_version(mpirun)

    def interrupted(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for signum in (signal.SIGTERM, signal.SIGINT):  # also when started in the background
        signal.signal(signum, interrupted)
    work = Path(tempfile.mkdtemp(prefix="traingrid-mpi-smoke-"))
    say(f"{args.nodes} node(s), Open MPI {version}, /dev/shm {job['shm_mib']} MiB, work "
        f"directory {work}")
    try:
        with NetnsRig(args.nodes, job["shm_mib"]) as rig:
            return smoke(args, rig, job, work, version)
    except RigError as exc:
        say(str(exc))
        return 1
    except KeyboardInterrupt:
        say("interrupted; the nodes' namespaces are removed")
        return 130
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):
                signal.signal(signum, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
