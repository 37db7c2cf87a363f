"""The rig's faults, measured on real processes: a lost node and a hung rank.

``LOSE_NODE=K`` (``make mpi-smoke NODES=3 LOSE_NODE=2``): the plan of a run that may shrink
(``min_nodes`` one fewer, so the plan launches it with elastic torchrun) trains on every node;
once a few steps and a mid-epoch checkpoint are behind it, node K is taken away as a lost
instance looks: its namespace's ``eth0`` goes down, then every process in it is killed (no
connection is closed: the others learn it from the collective timeout). The nodes left must
end the job SUCCEEDED (the main node exits 0) on a smaller world. The JSON line adds
``recovered``, ``nodes_after``, ``world_size_after``, ``recovery_s`` (from the loss to the
first step the smaller world completed, as the rig saw the logs) and ``steps_lost`` (steps
completed before the loss that the restart trained again), and ``reported``: the recovery as the
trainer itself recorded it in metrics.json (``traingrid_trainer.recovery``), which the run's
goodput counts; the smoke fails without it.

``HANG_RANK=K``: rank K stops stepping (``--hang_rank``); the main node's watchdog must end the
job within its window with exit 71, naming the rank; the smoke then exits 71 and says so.

The rig's settings for these runs (``FAULT_ENV``): a 20 s collective timeout and a 10 s
watchdog floor (the defaults, 60 s and 45 s, suit real jobs), and an expected failure every
half minute or so (``TRAINGRID_NODE_MTBF_HOURS``), so that Young/Daly's interval writes
checkpoints every few seconds here; 32-pixel images, 2 a rank, and no pre-flight check (the
plain smoke runs it), so that a step takes a second or two on the rig's shared CPUs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netns_rig import IP, NetnsRig, RigError

from traingrid_node.status import EXIT_STALLED

FAULT_ENV = {"TRAINGRID_COLLECTIVE_TIMEOUT_S": "20", "TRAINGRID_WATCHDOG_FLOOR_S": "10",
             "TRAINGRID_NODE_MTBF_HOURS": "0.03"}
STEP_LINE = re.compile(r"\[trainer rank 0/(\d+)\] epoch (\d+)/\d+ step (\d+)/(\d+) ")
RESUMED = re.compile(r"\[trainer rank 0/(\d+)\] resuming after epoch (\d+)(?: step (\d+))?")
STALLED = re.compile(r"stalled: (rank \d+ on node [^;]*)")
WINDOW = re.compile(r"\(window (\d+) s")
HUNG = "hanging as asked"
LOSE_AFTER_STEPS = 6
FAULT_TIMEOUT_S = 900.0  # 40 steps, a loss and a restart, on a busy machine's CPUs
WATCH_SLACK_S = 3.0  # the watchdog looks once a second, the rig at the logs 5 times
FAULT_STEPS = 40  # steps of the one epoch the fault runs train


def say(message: str) -> None:
    print(f"mpi-smoke: {message}", file=sys.stderr, flush=True)


@dataclass
class Watched:
    """What the rig saw in the nodes' logs, each line with when it saw it."""

    steps: list[tuple[float, int, int]] = field(default_factory=list)  # (t, world, step)
    resumed: list[tuple[float, int, int]] = field(default_factory=list)  # (t, world, done)
    timed_out: list[float] = field(default_factory=list)  # a collective's timeout, seen
    hung_at: float | None = None
    hung_wall: float | None = None  # the same, as a file's modification time reads
    offsets: dict[int, int] = field(default_factory=dict)

    def read(self, run: Path, nodes: int) -> None:
        now = time.monotonic()
        for index in range(nodes):
            path = run / f"node-{index}.log"
            if not path.exists():
                continue
            with path.open("rb") as log:
                log.seek(self.offsets.get(index, 0))
                chunk = log.read()
            complete = chunk[:chunk.rfind(b"\n") + 1]
            self.offsets[index] = self.offsets.get(index, 0) + len(complete)
            for line in complete.decode(errors="replace").splitlines():
                self.line(now, line)

    def line(self, now: float, line: str) -> None:
        if m := STEP_LINE.search(line):
            world, epoch, step, per_epoch = map(int, m.groups())
            self.steps.append((now, world, (epoch - 1) * per_epoch + step))
        elif m := RESUMED.search(line):
            self.resumed.append((now, int(m.group(1)), int(m.group(3) or 0)))
        elif "Timed out waiting" in line:
            self.timed_out.append(now)
        elif HUNG in line and self.hung_at is None:
            self.hung_at, self.hung_wall = now, time.time()


def torchrun_on_path(env: dict[str, str], bin_dir: Path) -> None:
    """The image's PyTorch has ``torchrun``; a venv whose torch came without its scripts
    gets one that runs this Python's ``torch.distributed.run``."""
    if shutil.which("torchrun", path=env["PATH"]):
        return
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "torchrun"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m torch.distributed.run \"$@\"\n")
    shim.chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"


def start_nodes(rig: NetnsRig, job: dict[str, Any], run: Path, data: Path,
                trainer_args: list[str], env_of: Any) -> list[subprocess.Popen[bytes]]:
    run.mkdir(parents=True)
    command = [sys.executable, "-m", "traingrid_node", *job["command"], *trainer_args]
    nodes = []
    for node in rig.nodes:
        env = env_of(job, node.index, len(rig.nodes), run, rig.nodes[0].address, data)
        env.update(FAULT_ENV)
        torchrun_on_path(env, run.parent / "bin")
        with (run / f"node-{node.index}.log").open("w") as log:
            nodes.append(subprocess.Popen(rig.command(node, command), env=env, stdout=log,
                                          stderr=subprocess.STDOUT, cwd=run,
                                          start_new_session=True))
    return nodes


def lose(rig: NetnsRig, index: int) -> None:
    """As a lost instance looks to the others: silence (the link goes down first, so no
    connection is closed), then nothing left running."""
    node = rig.nodes[index]
    subprocess.run([IP, "-n", node.namespace, "link", "set", "eth0", "down"], check=True)
    out = subprocess.run([IP, "netns", "pids", node.namespace], capture_output=True,
                         text=True, check=False).stdout
    for pid in map(int, out.split()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def trainer_args(args: Any, *extra: str) -> list[str]:
    return ["--synthetic", "--steps_per_epoch", str(FAULT_STEPS), "--num_epochs", "1",
            "--batch_size", "2", "--image_size", "32", "--no-preflight",
            "--log_every", "1", "--loader_workers", "0", *extra]


def lose_node(args: Any, rig: NetnsRig, job: dict[str, Any], work: Path, data: Path,
              env_of: Any, metrics_of: Any) -> int:
    nodes, lost = len(rig.nodes), args.lose_node
    launcher = job["environment"].get("TRAINGRID_LAUNCHER")
    if not 0 < lost < nodes:
        raise RigError(f"LOSE_NODE={lost}: a worker node, 1 to {nodes - 1} (losing the main "
                       "node ends the job, as on AWS Batch)")
    if launcher != "torchrun":
        raise RigError(f"the plan launches this run with {launcher}, which cannot go on "
                       "without a node: give it min_nodes below nodes (MIN_NODES)")
    run, started = work / "lose-node", time.monotonic()
    seen = Watched()
    try:
        status, lost_at = _train_and_lose(args, rig, job, run, data, env_of, seen)
    except RigError:
        sys.stderr.write("".join((run / f"node-{i}.log").read_text() for i in range(nodes)))
        raise
    logs = "".join((run / f"node-{i}.log").read_text() for i in range(nodes))
    if args.verbose or status:
        sys.stderr.write(logs)
    if status:
        say(f"lose-node: the main node exited {status}")
        return status
    if lost_at is None:
        raise RigError("lose-node: training ended before node could be taken away")
    print(json.dumps({"nodes": nodes, "world_size": nodes, "launcher": launcher,
                      "steps": FAULT_STEPS, "lost_node": lost,
                      **recovery(seen, metrics_of(run), nodes, lost_at),
                      "collective_timeout_s": float(
                          FAULT_ENV["TRAINGRID_COLLECTIVE_TIMEOUT_S"]),
                      "seconds": round(time.monotonic() - started, 1), "rig": "netns"}))
    return 0


def _train_and_lose(args: Any, rig: NetnsRig, job: dict[str, Any], run: Path, data: Path,
                    env_of: Any, seen: Watched) -> tuple[int, float | None]:
    """Train on every node, take node ``args.lose_node`` away after a few steps and a
    mid-epoch checkpoint; the main node's status and when the node was lost."""
    nodes, lost, started = len(rig.nodes), args.lose_node, time.monotonic()
    timeout = max(args.timeout, FAULT_TIMEOUT_S)
    processes = start_nodes(rig, job, run, data, trainer_args(args), env_of)
    lost_at: float | None = None
    try:
        while processes[0].poll() is None:
            if time.monotonic() - started > timeout:
                raise RigError(f"lose-node: still running after {timeout:g}s")
            time.sleep(0.2)
            seen.read(run, nodes)
            checkpoints = list((run / "output" / "checkpoints").glob("epoch-*-step-*.pt"))
            if (lost_at is None and checkpoints
                    and len(seen.steps) >= LOSE_AFTER_STEPS):
                lose(rig, lost)
                lost_at = time.monotonic()
                say(f"lose-node: took node {lost} away after step {seen.steps[-1][2]} "
                    f"({len(checkpoints)} mid-epoch checkpoint(s) written)")
        status = processes[0].wait()
        for index, process in enumerate(processes[1:], 1):
            if index != lost:
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    say(f"lose-node: node {index} still running after the main node exited")
        seen.read(run, nodes)
    finally:
        rig.stop_processes()
    return status, lost_at


def recovery(seen: Watched, metrics: dict[str, Any], nodes: int,
             lost_at: float) -> dict[str, Any]:
    """The recovery's figures, from what the rig saw and the run's metrics.json."""
    after = [(t, world, step) for t, world, step in seen.steps if world < nodes]
    before = [step for _t, world, step in seen.steps if world == nodes]
    resumed = [(t, done) for t, world, done in seen.resumed if world < nodes]
    timed_out = [t for t in seen.timed_out if t > lost_at]
    if not after or not resumed:
        raise RigError("lose-node: no step of a smaller world was seen")
    if not metrics.get("recoveries"):  # the run's goodput counts what the trainer reports
        raise RigError("lose-node: the trainer reported no recovery in metrics.json")
    return {
        "recovered": metrics["world_size"] < nodes and metrics["epochs"] == 1,
        "nodes_after": metrics["world_size"],  # one slot a node on the rig
        "world_size_after": metrics["world_size"],
        "recovery_s": round(after[0][0] - lost_at, 1),
        "steps_lost": max(before) - resumed[0][1],
        "resumed_from_step": resumed[0][1],
        # Where the time went: the survivors' collectives timing out, the restarted ranks
        # loading the checkpoint, their first step.
        "detected_s": round(timed_out[0] - lost_at, 1) if timed_out else None,
        "resumed_s": round(resumed[0][0] - lost_at, 1),
        # What the trainer itself reported for the run's goodput (metrics.json).
        "reported": metrics.get("recoveries"),
    }


def hang(args: Any, rig: NetnsRig, job: dict[str, Any], work: Path, data: Path,
         env_of: Any) -> int:
    nodes = len(rig.nodes)
    run, started = work / "hang", time.monotonic()
    seen = Watched()
    processes = start_nodes(rig, job, run, data,
                            trainer_args(args, "--hang_rank", str(args.hang_rank)), env_of)
    try:
        while processes[0].poll() is None:
            if time.monotonic() - started > args.timeout:
                raise RigError(f"hang: the watchdog did not end the job in {args.timeout:g}s")
            time.sleep(0.2)
            seen.read(run, nodes)
        status = processes[0].wait()
        ended = time.monotonic()
        seen.read(run, nodes)
    finally:
        rig.stop_processes()
    logs = "".join((run / f"node-{i}.log").read_text() for i in range(nodes))
    if args.verbose:
        sys.stderr.write(logs)
    stalled, window = STALLED.search(logs), WINDOW.search(logs)
    if status != EXIT_STALLED or not stalled or not window or seen.hung_at is None:
        sys.stderr.write(logs)
        raise RigError(f"hang: the main node exited {status}, not {EXIT_STALLED} with the "
                       "watchdog's verdict")
    # The watchdog's verdict (the node program keeps it beside the host file): when it named
    # the rank; then every rank's stacks, and the launcher stopped.
    verdicts = sorted(run.glob("verdict-*.json"))
    named = (verdicts[0].stat().st_mtime - seen.hung_wall if verdicts and seen.hung_wall
             else None)
    if named is None or named > int(window.group(1)) + WATCH_SLACK_S:
        raise RigError(f"hang: the watchdog named the rank {named} s after it stopped, past "
                       f"its window of {window.group(1)} s")
    say(f"hang: the watchdog named it {named:.1f} s after rank {args.hang_rank} stopped stepping "
        f"(window {window.group(1)} s) and the job ended {ended - seen.hung_at:.1f} s after: "
        f"{stalled.group(1)}; the main node exited {status}")
    return status
