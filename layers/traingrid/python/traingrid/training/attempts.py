"""Whether a failed training job gets another attempt, and with how many nodes.

A run may make up to ``max_attempts`` Batch jobs on the same file system:

- **No capacity** (AWS reported it for the RUNNABLE job — EC2's InsufficientInstanceCapacity or
  VcpuLimitExceeded in its compute environment's scaling activities, see ``capacity`` — or the
  job waited in RUNNABLE past ``timeouts.runnable_minutes``): the next job
  asks for half the nodes, never fewer than ``min_nodes``. The per-GPU batch stays; the trainer
  scales the learning rate with the smaller global batch (linear scaling rule).
- **Infrastructure** (the host went away — instance terminated, Spot reclaimed — so the
  container ended with no exit code, or a node's entrypoint failed to mount the file system,
  meet the other nodes, stay in touch with the main node or see its EFA devices, or the
  trainer's pre-flight check found a node far below the others, exit 75, whose verdict
  ``steps.next_attempt`` reads from the job's ``preflight.json``): the same
  nodes again. The trainer resumes from the newest checkpoint on the file system; the attempt
  records the newest that had reached S3 (the trainer archives each as it writes it), which is
  that one unless a newer one was still being archived.
- **The training code** (any other non-zero exit, which mpirun passes on from the trainer), or
  the training limit: no retry, the same code would fail the same way.

Pure: the step that runs this (``steps.next_attempt``) finds the checkpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from traingrid.errors import TrainingJobStuck, TrainingTimedOut
from traingrid.vocabulary.training_run import Attempt, PlanJob, TrainingJobState

# What the trainer leaves on the file system under the run's output folder (the node image's
# traingrid_node.metrics.CHECKPOINT_DIR and the trainer's checkpoint names, tested).
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_NAME = re.compile(r"epoch-(\d{4,})\.pt")
# Exit codes of the node entrypoint (traingrid_node.status, tested) that say the node, not the
# training code, failed.
INFRASTRUCTURE_EXIT_CODES = {
    65: "the node could not mount the FSx file system",
    66: "the nodes could not meet (rendezvous timed out)",
    67: "a worker lost the main node",
    # The instance type has EFA but the container saw fewer devices (a host without the EFA
    # driver, or an interface that did not attach): another attempt may get a host that has them.
    70: "the node's EFA devices were missing",
    # The trainer's watchdog saw no training step within its window (a rank hung; its verdict
    # in the main node's log names the node and rank): another attempt may get other hosts.
    71: "the training stalled (the watchdog ended it)",
    # The trainer's pre-flight check found a node far below the others before the long run
    # (passed on by mpirun and the entrypoint): another attempt may get other hosts.
    75: "the pre-flight check failed",
}
EXIT_PREFLIGHT = 75
# What the pre-flight check leaves in the run's output folder (the trainer's PREFLIGHT_FILE,
# tested): its ``cause`` names the node and the figure.
PREFLIGHT_FILE = "preflight.json"
HOST_GONE = "Host EC2"  # Batch's statusReason when a node's instance went away


class FailureKind(StrEnum):
    CAPACITY = "capacity"
    INFRASTRUCTURE = "infrastructure"
    TRAINING = "training"
    LIMIT = "limit"


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    summary: str  # a few words, for the attempt's record


def classify(job: TrainingJobState) -> Failure:
    """Why an attempt's job failed, from the training wait's state (``waits.JobState``)."""
    error, reason = job.get("error"), job.get("status_reason") or ""
    exit_code = job.get("exit_code")
    if error == TrainingJobStuck.__name__:
        # AWS's capacity error, when it said so before the runnable limit (training/capacity.py).
        said = f" ({job['capacity_code']})" if job.get("capacity_code") else ""
        return Failure(FailureKind.CAPACITY, f"no capacity{said}: waited "
                                             f"{job.get('waiting_s', 0) // 60} min in the queue")
    if error == TrainingTimedOut.__name__:
        return Failure(FailureKind.LIMIT, "over the training limit")
    if reason.startswith(HOST_GONE):
        return Failure(FailureKind.INFRASTRUCTURE, f"node lost: {reason}")
    if exit_code is None:
        return Failure(FailureKind.INFRASTRUCTURE,
                       f"the container ended without an exit code: {reason or 'no reason given'}")
    if exit_code == EXIT_PREFLIGHT and job.get("preflight"):
        # The measurement's own words: which node, which figure, which threshold.
        return Failure(FailureKind.INFRASTRUCTURE, f"exit {exit_code}: {job['preflight']}")
    if exit_code in INFRASTRUCTURE_EXIT_CODES:
        return Failure(FailureKind.INFRASTRUCTURE,
                       f"exit {exit_code}: {INFRASTRUCTURE_EXIT_CODES[exit_code]}")
    return Failure(FailureKind.TRAINING, f"the training command exited {exit_code}")


def shrunk(nodes: int, min_nodes: int) -> int:
    """The next attempt's nodes (or a SageMaker job's instances) after no capacity: half,
    never below the minimum."""
    return max(min_nodes, nodes // 2)


def newest_checkpoint(keys: list[str], prefix: str) -> str | None:
    """The newest ``epoch-NNNN.pt`` among S3 keys under the run's checkpoint ``prefix``."""
    found = [(int(m.group(1)), key) for key in keys
             if (m := CHECKPOINT_NAME.fullmatch(key.removeprefix(prefix)))]
    return max(found)[1] if found else None


def first_attempt(nodes: int) -> Attempt:
    return {"attempt": 1, "nodes": nodes, "reason": "first attempt", "resumed_from": None}


def with_nodes(job: PlanJob, nodes: int) -> PlanJob:
    """The job's plan on ``nodes``: the same per-node resources, MPI_GPUS recomputed."""
    mpi_gpus = nodes * job["gpus_per_node"]
    return {**job, "nodes": nodes, "mpi_gpus": mpi_gpus,
            "environment": {**job["environment"], "MPI_GPUS": str(mpi_gpus)}}


def next_attempt(job_plan: PlanJob, job: TrainingJobState, checkpoint: str | None) -> PlanJob:
    """The job's plan after its attempt failed: ``resubmit`` says whether to submit again (on
    ``nodes``, resuming from ``checkpoint``, the newest checkpoint's path on the file system)
    and ``decision`` says why, in words. The attempts so far stay in ``attempts``, the ended
    one closed with its job and what happened to it."""
    failure = classify(job)
    ended: Attempt = {**job_plan["attempts"][-1], "job_id": job.get("id"),
                      "outcome": failure.summary, "ran_s": int(job.get("running_s") or 0),
                      "waited_s": int(job.get("waiting_s") or 0)}
    attempts = [*job_plan["attempts"][:-1], ended]
    trained = bool(job_plan.get("trained") or job.get("started"))
    nodes, min_nodes = job_plan["nodes"], job_plan["min_nodes"]
    used, allowed = len(attempts), job_plan["max_attempts"]
    next_nodes: int | None = None
    if failure.kind is FailureKind.CAPACITY:
        smaller = shrunk(nodes, min_nodes)
        if smaller < nodes:
            next_nodes, why = smaller, f"{failure.summary} on {nodes} nodes; shrunk to {smaller}"
        else:
            decision = (f"not retried: no capacity for {nodes} nodes and min_nodes is "
                        f"{min_nodes}")
    elif failure.kind is FailureKind.INFRASTRUCTURE:
        next_nodes, why = nodes, failure.summary
    else:
        decision = (f"not retried: {failure.summary}; another attempt would fail the same way"
                    if failure.kind is FailureKind.TRAINING else f"not retried: {failure.summary}")
    if next_nodes is not None and used >= allowed:
        decision, next_nodes = f"not retried: {failure.summary}; all {allowed} attempts used", None
    if next_nodes is None:
        return {**job_plan, "attempts": attempts, "trained": trained, "resubmit": False,
                "decision": decision}
    attempts.append({"attempt": used + 1, "nodes": next_nodes, "reason": why,
                     "resumed_from": checkpoint})
    environment = {**job_plan["environment"], "TRAINGRID_ATTEMPT": str(used + 1)}
    resubmitted = with_nodes({**job_plan, "environment": environment}, next_nodes)
    resumed = f", resuming from {checkpoint}" if checkpoint else ", from the start"
    return {**resubmitted, "attempts": attempts, "trained": trained, "resubmit": True,
            "decision": f"attempt {used + 1} of {allowed} on {next_nodes} nodes{resumed}"}


def attempts_summary(attempts: list[dict[str, Any]]) -> str:
    """Every attempt in one line: its nodes, why it was made and how it ended."""
    parts = []
    for a in attempts:
        ended = f" → {a['outcome']}" if a.get("outcome") else ""
        parts.append(f"{a['attempt']}: {a['nodes']} nodes ({a['reason']}){ended}")
    return "; ".join(parts)
