"""Adaptation (moto 5.2.5): a multi-node job's nodes, and what a node's loss does to its job.

``DescribeJobs`` of ``<jobId>#<index>`` describes one node (``nodeDetails``); workers end with
the main node's status. As on AWS, a worker node's loss does not end the job: "Child node
failure doesn't cause more attempts" and "the job is finished only if the main node exits"
(AWS Batch User Guide, multi-node parallel jobs). Under the ``worker-lost`` fault the last node
of a run's first job loses its host mid-training (described FAILED, ``Host EC2 … terminated.``,
from then on); the others go on in the same job (the trainer's elastic recovery,
``traingrid_trainer``): they meet again and load the newest checkpoint (``RECOVERY_SECONDS``),
redo the steps since it (``LOST_WORK_SECONDS``) and train the rest on one node fewer. The main
node's loss fails the job (``node-lost``, :mod:`.batch`). Under ``hung-job`` a run's first job
stops stepping: the trainer's watchdog ends it after its window, exit 71.
"""

from __future__ import annotations

from typing import Any

LOST_AFTER_SECONDS = 20 * 60  # into training, as the main node's loss
# "The child nodes are launched after the main node is RUNNING" (AWS Batch User Guide): their
# own startedAt comes later than the job's.
WORKER_START_SECONDS = 30
# The namespace rig measured 46.5 s from a node's loss to the next completed step (collective
# timeout, re-rendezvous and checkpoint load); the goal is 60 s.
RECOVERY_SECONDS = 60
LOST_WORK_SECONDS = 5 * 60  # the steps since the newest checkpoint, trained again
LOST_WORKER_INSTANCE = "i-0a1b2c3d4e5f60718"
HANG_EXIT_CODE = 71  # the watchdog's: an infrastructure failure, retried (training.attempts)
# The watchdog's window: 20 median steps, at least its 45 s floor; the hang comes as the loss.
HANG_WINDOW_SECONDS = 45


def worker_lost_run_for(training_seconds: float, num_nodes: int) -> float:
    """Seconds from RUNNING to the end of a job that loses a worker node mid-training: the
    loss, the recovery, then what was left (and the lost steps) on one node fewer."""
    if training_seconds <= LOST_AFTER_SECONDS or num_nodes < 2:
        return training_seconds
    left = training_seconds - LOST_AFTER_SECONDS + LOST_WORK_SECONDS
    return LOST_AFTER_SECONDS + RECOVERY_SECONDS + left * num_nodes / (num_nodes - 1)


def recovery(num_nodes: int, gpus: int, per_rank_batch: int, images_per_s_per_gpu: float
             ) -> dict[str, Any]:
    """What the trainer reports in metrics.json of the recovery (``traingrid_node.metrics``'s
    Recovery): one node fewer, ``RECOVERY_SECONDS``, ``LOST_WORK_SECONDS`` trained again."""
    per_node = gpus // max(num_nodes, 1)
    step_s = per_rank_batch / images_per_s_per_gpu
    return {"nodes_before": num_nodes, "nodes_after": num_nodes - 1,
            "world_size_before": gpus, "world_size_after": gpus - per_node,
            "recovery_s": float(RECOVERY_SECONDS), "lost_work_s": float(LOST_WORK_SECONDS),
            "steps_lost": int(LOST_WORK_SECONDS / step_s)}


def node_description(parent: dict[str, Any], index: int, lost: dict[str, Any] | None = None
                     ) -> dict[str, Any]:
    """A node of a multi-node job, as Batch describes ``<jobId>#<index>``: workers end with the
    main node's status, but for ``lost`` (``lost_node``'s), ended FAILED where it was lost."""
    main = parent.get("nodeProperties", {}).get("mainNode", 0)
    out = dict(parent, jobId=f"{parent['jobId']}#{index}",
               jobArn=f"{parent['jobArn']}#{index}",
               nodeDetails={"nodeIndex": index, "isMainNode": index == main})
    out.pop("nodeProperties", None)
    if index != main and isinstance(parent.get("startedAt"), int):
        # The workers start once the main node runs (their instances launched with its).
        out["startedAt"] = parent["startedAt"] + WORKER_START_SECONDS * 1000
    return out | (lost or {})


def lost_node(stopped_ms: int) -> dict[str, Any]:
    """What DescribeJobs says of a worker node whose host went away."""
    reason = f"Host EC2 (instance {LOST_WORKER_INSTANCE}) terminated."
    return {"status": "FAILED", "stoppedAt": stopped_ms, "statusReason": reason,
            "container": {"reason": reason}}


def describe_jobs(previous: Any, simulated_of: Any) -> Any:
    """``DescribeJobs`` with node ids (``<jobId>#<index>``); ``simulated_of(job)``: the job's
    simulated life, or None."""
    def describe(self: Any, jobs: list[str] | None) -> list[dict[str, Any]]:
        wanted = list(jobs or [])
        parents = [j for j in wanted if "#" not in j]
        # No ids means every job; only node ids means no parent.
        found: list[dict[str, Any]] = previous(self, parents) if parents or not wanted else []
        for node in (j for j in wanted if "#" in j):
            parent_id, _, index = node.partition("#")
            job = self._jobs.get(parent_id)
            simulated = simulated_of(job) if job is not None else None
            if simulated is not None and index.isdigit():
                parent = job.describe()
                if int(index) < parent["nodeProperties"]["numNodes"]:
                    lost = simulated.lost_node_description(int(index))
                    found.append(node_description(parent, int(index), lost))
        return found

    return describe
