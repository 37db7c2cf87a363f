"""The job ``make mpi-smoke`` runs, as AWS Batch would start its containers: printed as JSON.

Runs in the project's venv (it plans with the runtime package and reads template.yaml):

- the job definition's ``Environment`` (template.yaml, ``TrainingJobDefinition``), then the
  overrides the state machine's ``SubmitTrainingJob`` state passes, each resolved against the
  plan of a small request (``training.plan.plan_run``), as Batch merges them; overrides that
  come from the file system (``FSX_*``) are left out and named: the rig has no Lustre; and
  the rig has no EFA devices, so its nodes are told so (``TRAINGRID_EFA_DEVICES=0``, as on a
  type without EFA: the fabric is TCP), whatever the planned type has;
- the command (``$.plan.job.command``);
- the container's ``/dev/shm`` in MiB: the job definition's ``LinuxParameters.
  SharedMemorySize``, the template parameter ``NodeSharedMemoryMiB``'s default.

``python containers/mnp/smoke_job.py --nodes 3`` prints one JSON object; ``--min-nodes 2`` (by
default ``MIN_NODES``, else one node fewer when ``LOSE_NODE`` is set) plans a run that may
shrink, which the plan launches with elastic torchrun.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from traingrid.training.plan import DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid_local.emulator.deploy import load_template

ROOT = Path(__file__).resolve().parents[2]
JOB_DEFINITION = "TrainingJobDefinition"
SUBMIT_STATE = "SubmitTrainingJob"
SHM_PARAMETER = "NodeSharedMemoryMiB"
# The rig's nodes are veth pairs in namespaces: no /dev/infiniband (the default types have EFA).
RIG_FABRIC = {"TRAINGRID_EFA_DEVICES": "0", "TRAINGRID_EFA_RDMA": "0"}


def container(template: dict[str, Any]) -> dict[str, Any]:
    ranges = template["Resources"][JOB_DEFINITION]["Properties"]["NodeProperties"][
        "NodeRangeProperties"]
    return dict(ranges[0]["Container"])


def shared_memory_mib(template: dict[str, Any], properties: dict[str, Any]) -> int:
    """The job definition's SharedMemorySize, a parameter's default or a number."""
    declared = properties.get("LinuxParameters", {}).get("SharedMemorySize")
    parameter = template.get("Parameters", {}).get(SHM_PARAMETER)
    if parameter is None or "Default" not in parameter:
        raise SystemExit(f"template.yaml has no parameter {SHM_PARAMETER} with a Default: the "
                         "job definition's /dev/shm size (LinuxParameters.SharedMemorySize) "
                         "comes from it")
    if declared != {"Ref": SHM_PARAMETER}:
        raise SystemExit(f"{JOB_DEFINITION}'s LinuxParameters.SharedMemorySize is {declared!r}, "
                         f"not !Ref {SHM_PARAMETER}")
    return int(parameter["Default"])


def resolve(path: str, document: dict[str, Any]) -> Any:
    """A ``$.a.b.c`` path of the state's input; None where it leads nowhere."""
    value: Any = document
    for key in path.removeprefix("$.").split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def submitted_overrides(plan: dict[str, Any]) -> tuple[dict[str, str], list[str], list[str]]:
    """The SubmitTrainingJob state's container overrides, resolved against ``plan``: the
    environment, the names left out (no value without a file system) and the command."""
    machine = json.loads((ROOT / "statemachines" / "training_run.asl.json").read_text())
    overrides = machine["States"][SUBMIT_STATE]["Parameters"]["NodeOverrides"][
        "NodePropertyOverrides"][0]["ContainerOverrides"]
    state_input = {"plan": plan}
    environment, left_out = {}, []
    for item in overrides["Environment"]:
        value = item["Value"] if "Value" in item else resolve(item["Value.$"], state_input)
        if value is None:
            left_out.append(item["Name"])
        else:
            environment[item["Name"]] = str(value)
    return environment, left_out, list(resolve(overrides["Command.$"], state_input))


def default_min_nodes(nodes: int) -> int | None:
    if raw := os.environ.get("MIN_NODES", "").strip():
        return int(raw)
    return nodes - 1 if os.environ.get("LOSE_NODE", "").strip() else None


def job(nodes: int, min_nodes: int | None = None) -> dict[str, Any]:
    template = load_template(ROOT / "template.yaml")
    properties = container(template)
    request = TrainingRunRequest(dataset="s3://traingrid-data/mpi-smoke/", name="mpi-smoke",
                                 nodes=nodes, min_nodes=min_nodes, batch_size=2, epochs=1,
                                 warmup_epochs=0)
    plan = plan_run(request, run="mpi-smoke", execution_arn="arn:aws:states:::execution:smoke",
                    dataset=DatasetSize(objects=1, bytes=1), now=datetime.now(UTC))
    environment = {e["Name"]: str(e["Value"]) for e in properties.get("Environment", [])}
    overrides, left_out, command = submitted_overrides(dict(plan))
    environment.update(overrides)
    environment.update(RIG_FABRIC)
    return {
        "environment": environment,
        "left_out": left_out,
        "command": command,
        "shm_mib": shared_memory_mib(template, properties),
        "instance_type": plan["job"]["instance_type"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--min-nodes", type=int, default=None,
                        help="the run's min_nodes (default: MIN_NODES, or one fewer with "
                             "LOSE_NODE)")
    args = parser.parse_args()
    min_nodes = args.min_nodes if args.min_nodes is not None else default_min_nodes(args.nodes)
    json.dump(job(args.nodes, min_nodes), sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
