"""The fan-out request: what ``POST /campaigns/{id}/runs`` may ask for.

``schema/campaign-fanout-request.schema.json`` is generated from this model (``make schema``).
Unset options come from the campaign's own record.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

from traingrid.campaigns.sagemaker_job import DEFAULT_HYPERPARAMETERS
from traingrid.campaigns.trainer_flags import TRAINER_FLAGS, flag_schema, flag_value
from traingrid.training.run_request import RUN_NAME_PATTERN, check_run_name, integral
from traingrid.validation import MAX_KEYS, RuleBroken, at_most
from traingrid.vocabulary.campaign_fanout import PLACEMENTS

CAMPAIGN_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,47}$"
SAGEMAKER_INSTANCE_PATTERN = r"^ml\.[a-z0-9]+\.[a-z0-9]+$"
# The trainer's flags a region's job may set (SageMaker passes each hyperparameter as
# ``--name value``; trainer_flags.py says what each takes). SageMaker's own names
# (``sagemaker_*``: sagemaker_submit_directory would fetch code from any tarball the role can
# read) are the stack's alone.
TRAINER_HYPERPARAMETERS = tuple(TRAINER_FLAGS)


def _known_hyperparameter(name: str) -> str:
    if name.startswith("sagemaker_"):
        raise ValueError(f"{name} is SageMaker's own setting, which the stack decides (a "
                         "request may not set any sagemaker_* name)")
    if name not in TRAINER_FLAGS:
        raise RuleBroken(f"the trainer has no hyperparameter {name}",
                         f"it takes {', '.join(TRAINER_HYPERPARAMETERS)}")
    return name


def _named(value: Any) -> Any:
    """A value's rule is its name's: each entry reaches the value's validator as (name,
    value)."""
    return {name: (name, v) for name, v in value.items()} if isinstance(value, dict) else value


def _trainer_value(entry: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    name, value = entry
    # A name the trainer does not take is refused as such (one problem, not one more for its
    # value).
    return flag_value(name, value) if name in TRAINER_FLAGS else value


# SageMaker's own limit on CreateTrainingJob's HyperParameters (a map of more is refused as a
# whole, before its names are checked one by one).
MAX_HYPERPARAMETERS = 100
HyperparameterName = Annotated[str, StringConstraints(min_length=1, max_length=256),
                               AfterValidator(_known_hyperparameter)]
Hyperparameters = Annotated[
    dict[HyperparameterName, Annotated[str | int | float, WrapValidator(_trainer_value)]],
    BeforeValidator(_named), BeforeValidator(at_most(MAX_HYPERPARAMETERS))]
# The document's statement of the same rules: the names, and what each takes.
HYPERPARAMETERS_SCHEMA: JsonDict = {
    "propertyNames": {"enum": list(TRAINER_HYPERPARAMETERS)},
    "properties": {name: flag_schema(flag) for name, flag in TRAINER_FLAGS.items()},
    "additionalProperties": False}
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
        description="Merged over the run's hyper-parameters for this region's job (the same "
        "rules).",
        json_schema_extra=HYPERPARAMETERS_SCHEMA)
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
        "trainer's own flags only (no sagemaker_* name), each a value its parser takes; "
        "warmup_epochs fewer than num_epochs (each the request's, else the campaign's, else "
        "90 epochs).",
        json_schema_extra=HYPERPARAMETERS_SCHEMA,
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


def _epochs(value: Any) -> int | None:
    """A number of epochs as the trainer reads its text; None for auto (or what it cannot
    read: another rule's problem)."""
    try:
        return int(str(value))
    except ValueError:
        return None


def warmup_problems(request: FanoutRequest,
                    campaign: Mapping[str, Any]) -> list[dict[str, str]]:
    """Where a region's job would warm up for no fewer epochs than it trains, which the
    trainer refuses (it exits 2, in every region): the request's own warmup_epochs or
    num_epochs, and each region's, over the campaign's hyperparameters and the defaults."""
    problems = []
    scopes = [("", request.hyperparameters)] + [
        (f"/regions/{region}", overrides.hyperparameters)
        for region, overrides in request.regions.items()]
    for prefix, own in scopes:
        if "warmup_epochs" not in own and "num_epochs" not in own:
            continue  # the run's, checked as such
        layers = {"the default": DEFAULT_HYPERPARAMETERS, "the campaign's": campaign,
                  "the request's": request.hyperparameters, "": own}
        merged = {k: v for layer in layers.values() for k, v in layer.items()}
        warmup, epochs = _epochs(merged.get("warmup_epochs")), _epochs(merged["num_epochs"])
        if warmup is None or epochs is None or warmup < epochs:
            continue
        whose = {name: next(f", {who}" if who else "" for who, layer in
                            reversed(layers.items()) if name in layer)
                 for name in ("warmup_epochs", "num_epochs")}
        field = "warmup_epochs" if "warmup_epochs" in own else "num_epochs"
        problems.append({"pointer": f"{prefix}/hyperparameters/{field}", "message": (
            f"warmup_epochs ({warmup}{whose['warmup_epochs']}) must be fewer than num_epochs "
            f"({epochs}{whose['num_epochs']}): the trainer takes no warmup as long as the "
            "run")})
    return problems
