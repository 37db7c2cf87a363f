"""The fan-out request: what ``POST /campaigns/{id}/runs`` may ask for.

``schema/campaign-fanout-request.schema.json`` is generated from this model (``make schema``).
Unset options come from the campaign's own record.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

from traingrid.training.run_request import RUN_NAME_PATTERN, check_run_name, integral
from traingrid.validation import MAX_KEYS, RuleBroken, at_most
from traingrid.vocabulary.campaign_fanout import PLACEMENTS

CAMPAIGN_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,47}$"
SAGEMAKER_INSTANCE_PATTERN = r"^ml\.[a-z0-9]+\.[a-z0-9]+$"
# The trainer's flags a region's job may set (SageMaker passes each hyperparameter as
# ``--name value``): every option of traingrid_trainer.config's parser that takes a value,
# but the folders SageMaker itself decides and the fault injection (a test holds this list
# to the parser). SageMaker's own names (``sagemaker_*``: sagemaker_submit_directory would
# fetch code from any tarball the role can read) are the stack's alone.
TRAINER_HYPERPARAMETERS = (
    "num_epochs", "batch_size", "warmup_epochs", "lr_decay_mode", "lr", "momentum",
    "weight_decay", "label_smoothing", "image_size", "steps_per_epoch", "train_images",
    "log_every", "loader_workers", "optimizer", "lars_lr", "lars_trust_coefficient",
    "input_pipeline",
)
# The trainer's options a request may not set, and why.
TRAINER_OPTIONS_NOT_HYPERPARAMETERS = {
    "data_dir": "SageMaker's train channel", "output_dir": "SageMaker's model folder",
    "checkpoint_dir": "SageMaker's checkpoint folder", "fail_rank": "fault injection",
    "hang_rank": "fault injection (the watchdog's test)",
    "synthetic": "a flag without a value", "clear_log": "a flag without a value",
    "benchmark_input": "a flag without a value (measures the input pipeline, trains nothing)",
    "benchmark_seconds": "the input benchmark's, not training's",
    "preflight": "a flag without a value; the stack's pre-flight check (TRAINGRID_PREFLIGHT)",
}


def _known_hyperparameter(name: str) -> str:
    if name.startswith("sagemaker_"):
        raise ValueError(f"{name} is SageMaker's own setting, which the stack decides (a "
                         "request may not set any sagemaker_* name)")
    if name not in TRAINER_HYPERPARAMETERS:
        raise RuleBroken(f"the trainer has no hyperparameter {name}",
                         f"it takes {', '.join(TRAINER_HYPERPARAMETERS)}")
    return name


# SageMaker's own limits on CreateTrainingJob's HyperParameters.
MAX_HYPERPARAMETERS = 100
HYPERPARAMETER_VALUE_LENGTH = 2500
HyperparameterName = Annotated[str, StringConstraints(min_length=1, max_length=256),
                               AfterValidator(_known_hyperparameter)]
Hyperparameters = Annotated[
    dict[HyperparameterName,
         Annotated[str, StringConstraints(max_length=HYPERPARAMETER_VALUE_LENGTH)] | int | float],
    BeforeValidator(at_most(MAX_HYPERPARAMETERS))]
# The document's statement of the same rule.
HYPERPARAMETER_NAMES_SCHEMA: JsonDict = {
    "propertyNames": {"enum": list(TRAINER_HYPERPARAMETERS)}}
REGION_PATTERN = r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$"
MAX_INSTANCE_COUNT = 500
MAX_REGIONS = 50
IMAGE_TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"


def _sagemaker_instance(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(SAGEMAKER_INSTANCE_PATTERN, value):
        raise ValueError("must be a SageMaker instance type, like ml.p3.16xlarge")
    return value


class RegionOverrides(BaseModel):
    """What one data region's job does differently from the others."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    _keys = model_validator(mode="before")(at_most(MAX_KEYS))

    hyperparameters: Hyperparameters = Field(
        default_factory=dict, max_length=MAX_HYPERPARAMETERS,
        description="Merged over the run's hyper-parameters for this region's job.",
        json_schema_extra=HYPERPARAMETER_NAMES_SCHEMA)
    instance_type: str | None = Field(
        default=None, description="This region's SageMaker instance type (placed and priced "
        "as such).", json_schema_extra={"pattern": SAGEMAKER_INSTANCE_PATTERN})
    image_tag: str | None = Field(
        default=None, description="Another tag of the stack's training image repository "
        "(TrainingImageRepository) for this region's job, e.g. a build with another "
        "algorithm; pushed with make push-images TAG=….",
        json_schema_extra={"pattern": IMAGE_TAG_PATTERN})

    _instance_type = field_validator("instance_type")(_sagemaker_instance)

    @field_validator("image_tag")
    @classmethod
    def _image_tag(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(IMAGE_TAG_PATTERN, value):
            raise ValueError("must be an image tag: letters, digits, _ . -, at most 128")
        return value


class FanoutRequest(BaseModel):
    """Train a campaign in every region where its data lives."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, title="CampaignFanoutRequest",
        json_schema_extra={"$id": "https://traingrid.dev/schema/campaign-fanout-request.json"},
    )

    _keys = model_validator(mode="before")(at_most(MAX_KEYS))

    name: str | None = Field(
        default=None,
        description="Run name (execution name); derived from the campaign and the time when "
        "absent.",
        json_schema_extra={"pattern": RUN_NAME_PATTERN},
    )
    datasets: Literal["new", "all"] = Field(
        default="new",
        description="new: the datasets registered since the campaign's last successful run; "
        "all: every dataset of the campaign.",
    )
    placement: Literal[PLACEMENTS] | None = Field(  # type: ignore[valid-type]
        default=None, description="Where each region's share trains (default: the campaign's).")
    instance_type: str | None = Field(
        default=None, description="SageMaker instance type, like ml.p3.16xlarge.",
        json_schema_extra={"pattern": SAGEMAKER_INSTANCE_PATTERN},
    )
    instance_count: Annotated[int, Field(ge=1, le=MAX_INSTANCE_COUNT),
                              BeforeValidator(integral)] | None = Field(
        default=None, description="Instances of each region's job.")
    min_instance_count: Annotated[int, Field(ge=1, le=MAX_INSTANCE_COUNT),
                                  BeforeValidator(integral)] | None = (
        Field(default=None, description="Fewest instances a region's job may shrink to when "
              "SageMaker has no capacity there (halving), before the job moves to the next "
              "acceptable region (default: the campaign's; at most instance_count)."))
    hyperparameters: Hyperparameters = Field(
        default_factory=dict, max_length=MAX_HYPERPARAMETERS,
        description="Merged over the campaign's hyper-parameters, for every region: the "
        "trainer's own flags only (no sagemaker_* name).",
        json_schema_extra=HYPERPARAMETER_NAMES_SCHEMA,
    )
    regions: Annotated[dict[Annotated[str, StringConstraints(pattern=REGION_PATTERN)],
                            RegionOverrides], BeforeValidator(at_most(MAX_REGIONS))] = Field(
        default_factory=dict, max_length=MAX_REGIONS,
        description="Per data region (where a share of the data is): that region's job's own "
        "hyper-parameters, instance type or image tag.",
        # Keys that are not region codes are refused: the document says so too.
        json_schema_extra={"additionalProperties": False})

    _run_name = field_validator("name")(check_run_name)

    _instance_type = field_validator("instance_type")(_sagemaker_instance)

    @model_validator(mode="after")
    def _fewest_at_most_all(self) -> Self:
        if self.instance_count is not None and self.min_instance_count is not None:
            problem = instance_count_problem(self, self.instance_count, None)
            if problem is not None:
                raise ValueError(problem["message"])
        return self

    def plan_options(self) -> dict[str, Any]:
        """What the fan-out's planning step overrides (only what was asked for)."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"name"})


def instance_count_problem(request: FanoutRequest, campaign_count: int,
                           campaign_min: int | None) -> dict[str, str] | None:
    """Why the fewest instances a region's job may shrink to would be more than it starts
    with: the request's own ``min_instance_count`` (else the campaign's) against its own
    ``instance_count`` (else the campaign's). A region's job starts on instance_count and
    halves down to min_instance_count; the plan of a fan-out refuses one above the other."""
    count = request.instance_count or campaign_count
    fewest = request.min_instance_count or campaign_min
    if fewest is None or fewest <= count:
        return None
    whose = "" if request.min_instance_count else "the campaign's "
    of = "" if request.instance_count else " (the campaign's)"
    return {"pointer": "/min_instance_count" if request.min_instance_count else
            "/instance_count", "message": (
                f"{whose}min_instance_count ({fewest}) must be at most instance_count "
                f"({count}{of})" + ("" if request.min_instance_count else
                                    ": ask for a min_instance_count at most that too"))}
