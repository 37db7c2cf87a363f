"""The TrainingRun request: the one contract for the API, the CLI and S3 manifests.

``schema/training-run-request.schema.json`` is generated from this model (``make schema``) and a
test keeps the two equal.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from traingrid.errors import CommandNotPermitted, DatasetNotPermitted, RequestInvalid
from traingrid.training.mpi_params import MPI_PARAMS_PATTERN, mpi_params_problems
from traingrid.validation import MAX_KEYS, at_most, parse
from traingrid.vocabulary.catalog import (
    AL2023_NVIDIA_UNSUPPORTED_FAMILIES,
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_NODES,
    INSTANCE_TYPES,
    PERSISTENT_1_PER_UNIT_MB_S,
    REFUSED_DEPLOYMENT_TYPES,
    DeploymentType,
    loader_shared_memory_mib,
    needs_own_ami,
)
from traingrid.vocabulary.training_run import ARCHIVE_ROOT

# The seed's NCCL settings (its 20 × p3.16xlarge): only what the trainer's NCCL reads (its
# HOROVOD_* settings are gone, nothing reads them; a request may still set them for a command
# of its own that runs Horovod).
DEFAULT_EXTRA_MPI_PARAMS = "-x NCCL_MIN_NRINGS=8 -x NCCL_LAUNCH_MODE=PARALLEL"
# An argument of a command: printable, no control characters (it is passed as argv, to no shell).
COMMAND_ARGUMENT_PATTERN = r"^[^\x00-\x1f\x7f]+$"
# What no dataset's key may hold, as far as the schema's pattern says it (``dataset_problems``
# refuses every character that shows as nothing): C0 and C1 control characters (NUL, tab,
# line breaks; FSx for Lustre's paths refuse NUL, CR, LF and U+0085: "ArchivePath pattern
# ^[^\u0000\u0085\u2028\u2029\r\n]{3,4357}$", botocore's fsx model), the line and
# paragraph separators, and the bidirectional marks that make a key read as another
# (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069).
KEY_REFUSED_CHARACTERS = r"\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069"
# A bucket and a key under it: never the bucket's root (a key of at least one character).
S3_PREFIX_PATTERN = (r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
                     rf"/[^{KEY_REFUSED_CHARACTERS}]+$")
# S3: "The name for a key is a sequence of Unicode characters whose UTF-8 encoding is at
# most 1,024 bytes long" (Amazon S3 User Guide, Naming objects).
MAX_KEY_BYTES = 1024
# Valid as a Step Functions execution name, a Batch job name and an S3 key segment.
RUN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$"


def integral(value: Any) -> Any:
    """271.0 is the integer 271 to JSON Schema; 271.5 stays a float, and is refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# An integer as JSON Schema reads one: a number with no fractional part.
JsonInteger = Annotated[int, BeforeValidator(integral)]


def check_run_name(value: str | None) -> str | None:
    """The run-name rule of every request, with a message a person can act on."""
    if value is not None and not re.fullmatch(RUN_NAME_PATTERN, value):
        raise ValueError(
            "must be 1-80 letters, digits, '-' or '_', starting with a letter or digit"
        )
    return value

_BUCKET_URI = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?", re.DOTALL)
# Beyond KEY_REFUSED_CHARACTERS (what the schema's pattern can say), a key shows as another
# when it holds what renders as nothing: every control (Cc), format (Cf: bidirectional and
# Arabic letter marks, zero-width spaces and joiners, the byte order mark, tags) and surrogate
# (Cs) character, line and paragraph separators, spaces other than U+0020, and Unicode's other
# default-ignorable code points (the combining grapheme joiner, Hangul fillers, Khmer's
# inherent vowels, Mongolian and other variation selectors, and the ranges reserved for more).
_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2065\u3164"
                        "\ufe00-\ufe0f\uffa0\ufff0-\ufff8\U000e0000-\U000e0fff]")


def _unseen(character: str) -> bool:
    category = unicodedata.category(character)
    return (category in _UNSEEN_CATEGORIES or (category == "Zs" and character != " ")
            or _IGNORABLE.match(character) is not None)


def _resolved(key: str) -> list[str]:
    """The key's segments as a path reads them: empty and '.' segments dropped, '..' one
    segment up."""
    segments: list[str] = []
    for segment in key.split("/"):
        if segment == "..":
            segments = segments[:-1]
        elif segment not in ("", "."):
            segments.append(segment)
    return segments


def dataset_problems(uri: str) -> list[str]:
    """Every reason ``uri`` is not a dataset a run may read: an S3 URI of a prefix below its
    bucket's root, outside the runs' archives, that fits S3's 1,024 bytes and is the key it
    shows. S3 reads a key byte for byte, so no invisible character, no form Unicode's NFKC
    writes otherwise (fullwidth ``ｒｕｎｓ``, a letter and its combining accent) and no ``.``,
    ``..`` or empty segment, which a path (and a person) reads as another place: the root and
    archive checks read the key as NFKC and a path would."""
    found = _BUCKET_URI.fullmatch(uri)
    if found is None:
        return ["must be an S3 URI of a prefix, like s3://my-bucket/imagenet/"]
    key = found.group(2) or ""
    problems = []
    shown = _resolved(unicodedata.normalize("NFKC", key))
    if not shown:
        problems.append(f"s3://{found.group(1)}/ is the bucket's root, not a dataset: name the "
                        "prefix that holds the data, like s3://my-bucket/imagenet/")
    elif shown[0] == ARCHIVE_ROOT:
        problems.append(f"{ARCHIVE_ROOT}/ holds the runs' archives (their outputs), not "
                        "datasets")
    unseen = sorted({f"U+{ord(c):04X}" for c in key if _unseen(c)})
    if unseen:
        problems.append(f"the prefix holds {', '.join(unseen[:5])}"
                        f"{' and more' if len(unseen) > 5 else ''}: no key of a dataset may "
                        "hold a control character (NUL, tab, a line break), a bidirectional "
                        "mark or an invisible character (a zero-width space, a byte order "
                        "mark, a space other than U+0020)")
    elif unicodedata.normalize("NFKC", key) != key:
        problems.append("the prefix is not in Unicode's NFKC form (that is "
                        f"{unicodedata.normalize('NFKC', key)[:200]!r}): S3 reads a key byte "
                        "for byte, so it is another key than the one it shows")
    segments = (key if key.endswith("/") else key + "/").split("/")[:-1]
    if key.strip("/") and any(segment in ("", ".", "..") for segment in segments):
        problems.append("the prefix has an empty ('//'), '.' or '..' segment: S3 keeps it as "
                        "written, a path reads it as another place")
    if len(key.encode(errors="surrogatepass")) > MAX_KEY_BYTES:
        problems.append(f"the prefix is {len(key.encode(errors='surrogatepass'))} bytes in "
                        f"UTF-8; an S3 key is at most {MAX_KEY_BYTES}")
    return problems


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    _keys = model_validator(mode="before")(at_most(MAX_KEYS))


class FsxOptions(_Strict):
    deployment_type: DeploymentType = Field(
        default=DeploymentType.SCRATCH_2,
        description="FSx for Lustre deployment type (hydrated from S3 with ImportPath).",
    )
    storage_capacity_gib: Annotated[
        int, Field(ge=1200, le=1_000_000), BeforeValidator(integral)] | None = Field(
        default=None,
        description="Storage capacity; by default sized to hold the dataset and to give the "
        "throughput the job reads it at (throughput grows with capacity), rounded up to a "
        "valid increment (1200, 2400, then steps of 2400 GiB).",
    )
    per_unit_storage_throughput: Literal[PERSISTENT_1_PER_UNIT_MB_S] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="PERSISTENT_1 only: MB/s per TiB of storage; by default the cheapest that "
        "gives the job's reads.",
    )
    preload: bool = Field(
        default=False,
        description="Load every dataset file's contents from S3 before training starts (the "
        "main node runs lfs hsm_restore and waits), rather than on each file's first read "
        "in the first epoch. traingrid plan shows how long either takes.",
    )

    @field_validator("deployment_type", mode="before")
    @classmethod
    def _offered(cls, value: Any) -> Any:
        if isinstance(value, str) and value in REFUSED_DEPLOYMENT_TYPES:
            raise ValueError(REFUSED_DEPLOYMENT_TYPES[value])
        return value

    @model_validator(mode="after")
    def _throughput_of_persistent(self) -> Self:
        if (self.per_unit_storage_throughput is not None
                and self.deployment_type is not DeploymentType.PERSISTENT_1):
            raise ValueError("per_unit_storage_throughput applies to deployment_type "
                             "PERSISTENT_1 only")
        return self


MIN_TRAINING_HOURS = 0.01


class Timeouts(_Strict):
    hydrate_minutes: JsonInteger = Field(default=60, ge=5, le=24 * 60)
    runnable_minutes: JsonInteger = Field(
        default=30, ge=1, le=7 * 24 * 60,
        description="How long the job may wait for capacity (RUNNABLE) before it is "
        "terminated and the run fails with a diagnosis.",
    )
    # At least 36 seconds: the training limit is whole seconds (SageMaker's
    # MaxRuntimeInSeconds "min 1", botocore's sagemaker model), never 0.
    training_hours: float = Field(
        default=72, ge=MIN_TRAINING_HOURS, le=14 * 24,
        description="How long the job may train before it is terminated; at least 0.01 (36 "
        "seconds), at most 336 (14 days).")
    archive_minutes: JsonInteger = Field(default=120, ge=5, le=24 * 60)


class TrainingRunRequest(_Strict):
    """A distributed training run: data in S3, an FSx for Lustre file system, a Batch MNP job."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, title="TrainingRunRequest",
        json_schema_extra={"$id": "https://traingrid.dev/schema/training-run-request.json"},
    )

    dataset: str = Field(
        max_length=1024,
        description="S3 URI of the dataset prefix that hydrates the file system. It must be in "
        "the stack's data bucket (stack output DataBucketName), the only bucket TrainGrid's "
        "roles may read: another bucket is refused (the API answers 403).",
        json_schema_extra={"pattern": S3_PREFIX_PATTERN},
    )
    name: str | None = Field(
        default=None,
        description="Run name (execution and job name); derived from the trigger when absent.",
        json_schema_extra={"pattern": RUN_NAME_PATTERN},
    )
    nodes: JsonInteger = Field(default=DEFAULT_NODES, ge=1, le=500,
                               description="Nodes of the multi-node job.")
    min_nodes: Annotated[int, Field(ge=1, le=500), BeforeValidator(integral)] | None = Field(
        default=None,
        description="Fewest nodes the run may train on (at most nodes; by default nodes). When "
        "the job waits for capacity past timeouts.runnable_minutes, the run submits it again "
        "on half the nodes, never fewer than min_nodes. Each GPU keeps batch_size images; the "
        "learning rate scales with the smaller global batch.")
    max_attempts: JsonInteger = Field(
        default=3, ge=1, le=10,
        description="Most Batch jobs the run makes: after no capacity (on fewer nodes) or an "
        "infrastructure failure such as a lost node (on the same nodes, resuming from the "
        "newest checkpoint). A failure of the training command itself is never retried.")
    instance_type: Literal[tuple(INSTANCE_TYPES)] = Field(  # type: ignore[valid-type]
        default=DEFAULT_INSTANCE_TYPE,
        description="EC2 instance type of every node; it must also be one of the stack's "
        "TrainingInstanceTypes (by default p4d.24xlarge, p5.48xlarge): another is refused "
        "(the API answers 400 listing them). p3 and g3 types train only on a stack deployed "
        "with ImageIdOverride (Batch's ECS_AL2023_NVIDIA AMI does not support them).",
    )
    batch_size: JsonInteger = Field(default=256, ge=1, le=65_536, description="Images per GPU.")
    expected_images_per_s_per_gpu: Annotated[
        int, Field(ge=1, le=1_000_000), BeforeValidator(integral)] | None = Field(
        default=None,
        description="Images per second each GPU trains at: what the file system must feed. "
        "By default the instance type's ResNet-50 mixed-precision figure (traingrid plan "
        "shows it).")
    dataset_records: Annotated[
        int, Field(ge=1, le=10**12), BeforeValidator(integral)] | None = Field(
        default=None,
        description="Images (records) in the dataset, when its objects are shards such as "
        "TFRecord files: the mean record size is then its bytes over this. By default each "
        "object is a record when objects average 4 MiB or less, else ~110 KB a record.")
    epochs: JsonInteger = Field(default=90, ge=1, le=10_000,
                                description="Epochs to train; more than warmup_epochs.")
    warmup_epochs: Annotated[
        int, Field(ge=0, le=10_000), BeforeValidator(integral)] | None = Field(
        default=None,
        description="Epochs of learning-rate warmup; fewer than epochs. By default the "
        "trainer's rule for the global batch: none up to 256 images, 5 epochs below 32,768, "
        "25 from there (published large-batch recipes), at most half the epochs.")
    lr_decay_mode: Literal["poly", "cosine", "step", "linear"] = "poly"
    extra_mpi_params: str = Field(
        default=DEFAULT_EXTRA_MPI_PARAMS, max_length=4096,
        description="Variables set (-x NAME=VALUE) or forwarded (-x NAME) to every rank by "
        "mpirun, and nothing else: only NCCL_*, FI_*, GLOO_*, HOROVOD_*, TORCH_NCCL_*, "
        "TORCH_DISTRIBUTED_*, OMP_NUM_THREADS, MKL_NUM_THREADS, CUDA_DEVICE_MAX_CONNECTIONS "
        "and CUDA_LAUNCH_BLOCKING, never one whose name has a word such as PLUGIN, PATH, FILE, "
        "CONF, DIR or LIB, nor one that chooses where ranks meet, listen or send "
        "(NCCL_COMM_ID, NCCL_RAS_ADDR, HOROVOD_GLOO_RENDEZVOUS_ADDR, HOROVOD_HOSTNAME, a name "
        "with ADDR, PORT, HOSTNAME, URL, URI, ENDPOINT or RENDEZVOUS); values hold no '/'. "
        "Passed as arguments, never to a shell.",
        json_schema_extra={"pattern": MPI_PARAMS_PATTERN.pattern})
    command: list[Annotated[str, Field(
        min_length=1, max_length=1024, pattern=COMMAND_ARGUMENT_PATTERN)]] | None = Field(
        default=None, min_length=1, max_length=128,
        description="The training command every node's entrypoint launches under mpirun, as a "
        "list of arguments (never given to a shell). By default the image's trainer, "
        "python3 -m traingrid_trainer, which reads epochs, batch_size, warmup_epochs and "
        "lr_decay_mode from the job's environment. Taken only by POST /command-runs of a "
        "stack deployed with AllowRunCommands=true; POST /runs answers 403 and a manifest "
        "is rejected.")
    launcher: Literal["mpirun", "torchrun"] | None = Field(
        default=None,
        description="How the nodes start the training command: mpirun (the main node starts "
        "every rank over ssh, extra_mpi_params on its line; the job ends when a node is lost) "
        "or torchrun (elastic: each node's agent starts its own ranks and, when a node fails "
        "or leaves, the agents meet again with the nodes left, at least min_nodes, and "
        "restart the ranks from the newest checkpoint, inside the same Batch job). Unset: "
        "torchrun on EKS (EksClusterName); on ECS torchrun when min_nodes is below nodes and "
        "the request sets no extra_mpi_params (a lost worker node costs a restart, not a new "
        "attempt), else mpirun.")
    fsx: FsxOptions = Field(default_factory=FsxOptions)
    timeouts: Timeouts = Field(default_factory=Timeouts)

    @field_validator("dataset")
    @classmethod
    def _s3_prefix(cls, value: str) -> str:
        problems = dataset_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value if value.endswith("/") else value + "/"

    _run_name = field_validator("name")(check_run_name)

    @field_validator("extra_mpi_params")
    @classmethod
    def _safe_mpi_params(cls, value: str) -> str:
        problems = mpi_params_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _fields_agree(self) -> Self:
        problems = []
        if self.warmup_epochs is not None and self.warmup_epochs >= self.epochs:
            problems.append(
                f"warmup_epochs ({self.warmup_epochs}) must be less than epochs ({self.epochs})")
        if self.min_nodes is not None and self.min_nodes > self.nodes:
            problems.append(f"min_nodes ({self.min_nodes}) must be at most nodes ({self.nodes})")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def bucket(self) -> str:
        return self.dataset.removeprefix("s3://").split("/", 1)[0]

    @property
    def prefix(self) -> str:
        return self.dataset.removeprefix("s3://").split("/", 1)[1]


def require_runnable_here(request: TrainingRunRequest, data_bucket: str,
                          instance_types: Sequence[str] | None,
                          shared_memory_mib: int | None = None, *,
                          launches_p3_and_g3: bool = True) -> None:
    """What this stack can run: datasets in its own data bucket only (else
    ``DatasetNotPermitted``, the API's 403), on the instance types its compute environment
    may launch (``instance_types``; None allows the whole catalog) and its AMI supports (p3
    and g3 only where ``launches_p3_and_g3``: the stack names its own AMI, ImageIdOverride, or
    trains on EKS), with the image's trainer only batches its data loaders can pass through the
    containers' /dev/shm (``shared_memory_mib``, the stack's NodeSharedMemoryMiB; None: not
    checked). Every problem at once."""
    problems = []
    if instance_types is not None and request.instance_type not in instance_types:
        problems.append({
            "pointer": "/instance_type",
            "message": f"this stack's compute environment launches only "
                       f"{', '.join(instance_types)}; {request.instance_type} would wait for "
                       f"capacity that never comes",
        })
    if not launches_p3_and_g3 and needs_own_ami(request.instance_type):
        families = " and ".join(AL2023_NVIDIA_UNSUPPORTED_FAMILIES)
        problems.append({
            "pointer": "/instance_type",
            "message": f"{request.instance_type} cannot launch on this stack: AWS Batch "
                       f"starts its GPU nodes on the ECS_AL2023_NVIDIA AMI, which does not "
                       f"support {families} instance types; choose another type (such as "
                       f"{DEFAULT_INSTANCE_TYPE}) or deploy the stack with "
                       f"ImageIdOverride=<an AMI that supports {request.instance_type}>",
        })
    uses_trainer = request.command is None or "traingrid_trainer" in request.command
    needed = loader_shared_memory_mib(INSTANCE_TYPES[request.instance_type].gpus,
                                      request.batch_size)
    if shared_memory_mib is not None and uses_trainer and needed > shared_memory_mib:
        problems.append({
            "pointer": "/batch_size",
            "message": f"the trainer's data loaders need {needed} MiB of shared memory on a "
                       f"{request.instance_type} node for batch_size {request.batch_size}; this "
                       f"stack's containers have {shared_memory_mib} MiB (NodeSharedMemoryMiB): "
                       f"use a smaller batch_size or deploy with a larger NodeSharedMemoryMiB",
        })
    if request.bucket != data_bucket:
        problems.append({
            "pointer": "/dataset",
            "message": f"TrainGrid reads datasets from s3://{data_bucket}/ only; "
                       f"s3://{request.bucket}/ is not its data bucket",
        })
        raise DatasetNotPermitted(problems)
    if problems:
        raise RequestInvalid(problems)


# A run's own command is code the fleet runs as root: only the stack's owner may allow it
# (the AllowRunCommands parameter), and only on its own route, whose execute-api:Invoke is
# a grant of its own. Manifests never choose one.
COMMAND_ROUTE = "POST /command-runs"
COMMAND_PARAMETER = "AllowRunCommands"


def command_problems(body: Any, *, allowed: bool, source: str) -> list[dict[str, str]]:
    """Why ``body`` (a request as sent) may not name its own ``command``, if it does:
    ``allowed`` says whether it came the one way that may (the command route of a stack that
    takes commands), ``source`` what it came as (a manifest, ``POST /runs``, a run's input)."""
    if not isinstance(body, dict) or "command" not in body or allowed:
        return []
    return [{"pointer": "/command", "message": (
        f"{source} cannot choose the command every node runs (it runs as root on the "
        f"training fleet); only {COMMAND_ROUTE} may, on a stack deployed with "
        f"{COMMAND_PARAMETER}=true, for principals granted execute-api:Invoke on it. "
        "Leave command out to run the image's trainer")}]


def parse_request(body: Any, source: str = "request", *, commands: bool,
                  sent_as: str) -> TrainingRunRequest:
    """``body`` as a TrainingRunRequest, with a command only where ``commands`` allows one
    (``command_problems``): every problem at once, as RequestInvalid; CommandNotPermitted
    when the command is the only one."""
    refused = command_problems(body, allowed=commands, source=sent_as)
    try:
        request = parse(TrainingRunRequest, body, source)
    except RequestInvalid as invalid:
        raise RequestInvalid(invalid.problems + refused, source) from None
    if refused:
        raise CommandNotPermitted(refused, source)
    return request
