"""What Schemathesis cannot read from the document: the rules across fields of a TrainingRun
request (POST /runs, POST /plans), and the deployment's own limit.

JSON Schema checks each field alone; ``warmup_epochs`` must also be less than ``epochs``,
``min_nodes`` at most ``nodes``, and ``fsx.per_unit_storage_throughput`` set only with
``fsx.deployment_type`` PERSISTENT_1 (the document says so in the fields' descriptions, and the
API answers 400 otherwise), and
``instance_type`` must be one the stack's compute environment launches (its
``TrainingInstanceTypes``; the document says so, and the API answers 400 listing them), and
no variable of ``extra_mpi_params`` may have a refused word in its name (its description says
which), and a dataset is never under ``runs/`` nor only slashes below its bucket (its
description and security.md say so). A fan-out's ``min_instance_count`` is at most its
``instance_count``, the request's own or the sample campaign's (10, shrinking to 5), and its
``warmup_epochs`` fewer than its ``num_epochs``, each the request's (or a region's) own or the
sample campaign's (10 of 90).
Positive cases that break either are schema-valid yet invalid here, so they are left out
instead of being counted as "schema-valid request rejected"; negative cases are kept. Loaded
through schemathesis.toml.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.generation import GenerationMode

from traingrid.campaigns.fanout_request import FanoutRequest, warmup_problems
from traingrid.errors import RequestInvalid
from traingrid.training.mpi_params import mpi_params_problems
from traingrid.training.run_request import TrainingRunRequest, dataset_problems
from traingrid.validation import parse
from traingrid_local.stack import sample_campaign
from traingrid_local.templates import load_template

DEFAULT_EPOCHS = TrainingRunRequest.model_fields["epochs"].default
DEFAULT_WARMUP_EPOCHS = TrainingRunRequest.model_fields["warmup_epochs"].default
DEFAULT_NODES = TrainingRunRequest.model_fields["nodes"].default
FANOUT_PATH = "/campaigns/{campaign_id}/runs"
# The sample campaign's instances, and the fewest its jobs shrink to.
CAMPAIGN_INSTANCES, CAMPAIGN_MIN_INSTANCES = 10, 5
# What the served stack's compute environment launches (the template's default).
LAUNCHED_TYPES = load_template()["Parameters"]["TrainingInstanceTypes"]["Default"].split(",")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@schemathesis.hook.apply_to(path=["/runs", "/plans", FANOUT_PATH], method="POST")
def filter_case(context: Any, case: Any) -> bool:
    body = case.body
    if case.meta is not None and case.meta.generation.mode is not GenerationMode.POSITIVE:
        return True
    if not isinstance(body, dict):
        return True
    if case.operation.path == FANOUT_PATH:
        return _fanout_counts_ordered(body) and _fanout_warms_up_less(body)
    if body.get("instance_type", LAUNCHED_TYPES[0]) not in LAUNCHED_TYPES:
        return False
    fsx = body.get("fsx")
    if (isinstance(fsx, dict) and fsx.get("per_unit_storage_throughput") is not None
            and fsx.get("deployment_type") != "PERSISTENT_1"):
        return False
    dataset = body.get("dataset")
    if isinstance(dataset, str) and dataset_problems(dataset):
        return False  # under runs/, or only slashes: the pattern cannot say
    params = body.get("extra_mpi_params")
    if isinstance(params, str) and mpi_params_problems(params):
        return False  # a name with a refused word (…_PLUGIN, …_PATH): the pattern cannot say
    return (_ordered(body.get("warmup_epochs", DEFAULT_WARMUP_EPOCHS),
                     body.get("epochs", DEFAULT_EPOCHS), strict=True)
            and _ordered(body.get("min_nodes"), body.get("nodes", DEFAULT_NODES)))


def _ordered(low: Any, high: Any, strict: bool = False) -> bool:
    """False only when both are numbers out of order (below, or at most with strict=False)."""
    if not (_number(low) and _number(high)):
        return True
    return low < high if strict else low <= high


def _fanout_counts_ordered(body: dict[str, Any]) -> bool:
    count = body.get("instance_count")
    fewest = body.get("min_instance_count")
    count = count if _number(count) else CAMPAIGN_INSTANCES
    fewest = fewest if _number(fewest) else CAMPAIGN_MIN_INSTANCES
    return _ordered(fewest, count)


def _fanout_warms_up_less(body: dict[str, Any]) -> bool:
    try:
        request = parse(FanoutRequest, body)
    except RequestInvalid:
        return True  # another rule's, which the API answers for
    return not warmup_problems(request, sample_campaign.HYPERPARAMETERS)
