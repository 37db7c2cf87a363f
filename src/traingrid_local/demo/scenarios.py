"""What ``traingrid demo`` and ``traingrid faults`` run, as plain data: the demo's scenarios
(the faults each meets and the end state each pipeline must reach) and the fault matrix's
pipelines and fault kinds.

The CLI's help and ``traingrid scenarios`` show them, so this module loads nothing of the
emulator beyond its fault names: every other command answers without loading it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from traingrid_local.emulator.fault_injection import STATE_FAULTS, StateFault

# The demo's sample dataset in its data bucket; its manifest is uploaded beside it.
DATASET_PREFIX = "imagenet2012/resized/"
DEFAULT_KEY = DATASET_PREFIX + "manifest.json"


@dataclass(frozen=True)
class Scenario:
    faults: frozenset[str]
    expected: dict[str, str]  # pipeline → the status its runs must end in
    state_faults: Mapping[str, StateFault] = field(default_factory=dict)
    description: str | None = None  # what happens, when it is not one named fault
    # Fields of the uploaded run request (a --manifest's fields override them).
    request: Mapping[str, Any] = field(default_factory=dict)


# A run is stopped this far into its training wait, while its job trains.
ABORT_TRAINING_AFTER_S = 30 * 60

SCENARIOS: dict[str, Scenario] = {
    "happy": Scenario(frozenset(), {"training": "SUCCEEDED", "campaign": "SUCCEEDED"}),
    "fsx-create-failed": Scenario(frozenset({"fsx-create-failed"}), {"training": "FAILED"}),
    "batch-job-failed": Scenario(frozenset({"batch-job-failed"}), {"training": "FAILED"}),
    "node-lost": Scenario(
        frozenset({"node-lost"}), {"training": "SUCCEEDED"},
        description="the first job's main node host is lost after 20 minutes; the run resumes "
                    "from its checkpoint on the same nodes and succeeds on the second attempt"),
    "worker-lost": Scenario(
        frozenset({"worker-lost"}), {"training": "SUCCEEDED"},
        description="the first job loses a worker node's host after 20 minutes; the job goes "
                    "on on the others (their elastic recovery) and succeeds in that attempt"),
    "hung-job": Scenario(
        frozenset({"hung-job"}), {"training": "SUCCEEDED"},
        description="the first job stops stepping after 20 minutes; the trainer's watchdog "
                    "ends it (exit 71) and the second attempt succeeds"),
    "slow-node": Scenario(
        frozenset({"slow-node"}), {"training": "SUCCEEDED"},
        description="the first job's pre-flight check finds one node far below the others and "
                    "exits 75 before training; the second attempt, on other hosts, succeeds"),
    "node-lost-every-attempt": Scenario(
        frozenset({"node-lost-every-attempt"}), {"training": "FAILED"},
        description="every job's main node host is lost; after 3 attempts the run fails, "
                    "naming each"),
    "capacity-shrink": Scenario(
        frozenset({"capacity-8-nodes"}), {"training": "SUCCEEDED"},
        request={"nodes": 20, "min_nodes": 4},
        description="only 8 nodes can be had for a run of 20 (min_nodes 4): it shrinks to 10, "
                    "then 5, and trains on 5"),
    "stuck-runnable": Scenario(frozenset({"stuck-runnable"}), {"training": "FAILED"}),
    "vcpu-quota": Scenario(
        frozenset({"vcpu-quota"}), {"training": "SUCCEEDED"},
        request={"nodes": 20, "min_nodes": 4},
        description="the account's vCPU limit (512) holds 5 p4d.24xlarge: a run of 20 is told "
                    "VcpuLimitExceeded within minutes, shrinks to 10, then 5, and trains on 5"),
    "export-failed": Scenario(frozenset({"export-failed"}), {"training": "FAILED"}),
    "lost-events": Scenario(frozenset({"lost-events"}), {"training": "SUCCEEDED"}),
    "throttling": Scenario(frozenset({"throttling"}),
                           {"training": "SUCCEEDED", "campaign": "SUCCEEDED"}),
    "sagemaker-capacity": Scenario(frozenset({"sagemaker-capacity"}), {"campaign": "SUCCEEDED"}),
    "sagemaker-quota": Scenario(frozenset({"sagemaker-quota"}), {"campaign": "SUCCEEDED"}),
    "sagemaker-shrink": Scenario(
        frozenset({"sagemaker-capacity-5"}), {"campaign": "SUCCEEDED"},
        description="the fault region has capacity for 5 instances, not the campaign's 10: "
                    "its job shrinks to 5 (the campaign's min_instance_count) and trains there"),
    "sagemaker-job-failed": Scenario(frozenset({"sagemaker-job-failed"}),
                                     {"campaign": "FAILED"}),
    "abort-during-hydrate": Scenario(
        frozenset(), {"training": "ABORTED"}, {"CheckFileSystem": StateFault("abort")},
        "the run is stopped (StopExecution) while its file system hydrates"),
    "abort-during-training": Scenario(
        frozenset(), {"training": "ABORTED"},
        {"AwaitTrainingJob": StateFault("abort", after_s=ABORT_TRAINING_AFTER_S)},
        "the run is stopped 30 minutes into its training job"),
    "abort-during-archive": Scenario(
        frozenset(), {"training": "ABORTED"}, {"CheckArchive": StateFault("abort")},
        "the run is stopped while its archive in S3 is checked"),
}

# The fault matrix's pipelines: each one's state machine, its definition, and the stack output
# that names it.
PIPELINES = {"training": ("TrainingRun", "statemachines/training_run.asl.json",
                          "TrainingRunStateMachineArn"),
             "campaign": ("CampaignFanout", "statemachines/campaign_fanout.asl.json",
                          "CampaignFanoutStateMachineArn")}
FAULT_KINDS = tuple(STATE_FAULTS)
