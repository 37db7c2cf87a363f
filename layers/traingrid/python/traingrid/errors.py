"""Domain errors: the one place that names every failure TrainGrid reports.

A Lambda reports an exception's class name as its ``errorType``, so these class names are the
error names the state machines match in Retry/Catch and show in Fail states; the names a step
reports without raising (the training wait's ``error``, a Fail state's) are classes here too,
used by ``__name__`` (tests/template/test_asl_names.py holds the ASL to them). Messages say what
happened and what to do about it.
"""

from __future__ import annotations


class TrainGridError(Exception):
    """Base of every error TrainGrid raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# A request can hold tens of thousands of problems (a key each) and Lambda answers at most
# 6 MB: a message or an answer lists the first few, each cut short, and counts the rest.
LISTED_PROBLEMS = 20
LISTED_CHARACTERS = 500  # of a listed pointer or message, which may echo the request


def _clipped(text: str) -> str:
    return text if len(text) <= LISTED_CHARACTERS else text[:LISTED_CHARACTERS - 1] + "…"


class RequestInvalid(TrainGridError):
    """A request, manifest or event failed validation; ``problems`` lists every one of them,
    ``listed`` the first LISTED_PROBLEMS (what the message and the API's answer show)."""

    def __init__(self, problems: list[dict[str, str]], source: str = "request") -> None:
        self.problems = problems
        self.listed = [p | {"pointer": _clipped(p["pointer"]), "message": _clipped(p["message"])}
                       for p in problems[:LISTED_PROBLEMS]]
        listed = "; ".join(f"{p['pointer'] or '/'}: {p['message']}" for p in self.listed)
        more = len(problems) - len(self.listed)
        super().__init__(f"Invalid {source} ({len(problems)} problem(s)): {listed}"
                         + (f"; and {more} more" if more else ""))


class DatasetNotPermitted(RequestInvalid):
    """The dataset is outside the stack's data bucket, the only one its roles may read (the
    API answers 403; a manifest naming it is rejected like any invalid one)."""


class CommandNotPermitted(RequestInvalid):
    """A request names its own command where commands are not taken: a manifest, POST /runs,
    or the command route of a stack deployed without AllowRunCommands (the API answers 403)."""


class RequestTooLarge(TrainGridError):
    """A request whose run would not fit Step Functions' limit on an execution's input and
    states (the API answers 413)."""


class NotFound(TrainGridError):
    """What the caller named does not exist (the API answers 404)."""


class RecordNotFound(NotFound):
    """A campaign, run or region job the caller named is not in the campaign database."""


class RunNotFound(NotFound):
    """No TrainingRun or CampaignFanout execution has this name."""


class RunConflict(TrainGridError):
    """A run of this name exists, started by a different request (the API answers 409)."""


class IdempotencyKeyReused(TrainGridError):
    """An Idempotency-Key came back with a different request than the first time (422)."""


class RequestInProgress(TrainGridError):
    """The first request with this Idempotency-Key has not finished yet (409; retry)."""


class NoCapacity(TrainGridError):
    """No region can take the job: none enabled, priced and with headroom for the fleet."""

    def __init__(self, region: str, instance_type: str, instance_count: int, why: str) -> None:
        self.region, self.instance_type, self.instance_count = region, instance_type, instance_count
        super().__init__(
            f"No region can train the {region} data on {instance_count} × {instance_type}: "
            f"{why}, and no other enabled region with a price for {instance_type} has headroom "
            f"for {instance_count}. Raise the quota or wait for capacity, or plan with fewer "
            "instances or another instance type."
        )


class DatasetNotFound(TrainGridError):
    """The dataset prefix holds no objects."""


class FileSystemFailed(TrainGridError):
    """FSx reported the file system FAILED or MISCONFIGURED while hydrating."""


class HydrateTimedOut(TrainGridError):
    """The file system did not become AVAILABLE within the hydrate limit."""


class ExportFailed(TrainGridError):
    """The export of the run's outputs to S3 failed."""


class ExportTimedOut(TrainGridError):
    """The export did not finish within the archive limit."""


class ArchiveIncomplete(TrainGridError):
    """The export reported success but S3 does not hold what it exported."""


class TrainingJobStuck(TrainGridError):
    """The training job got no nodes: AWS said none will come, or it waited in the queue past
    its runnable limit (the training wait's ``error``; the run may shrink and try again)."""


class TrainingTimedOut(TrainGridError):
    """The training job ran past its training limit and was terminated."""


class TrainingJobFailed(TrainGridError):
    """The training job ended FAILED (its code, or its nodes)."""


class FileSystemNotDeleted(TrainGridError):
    """The run's file system could not be deleted (the janitor deletes it once safe)."""


class UnknownFailure(TrainGridError):
    """A run ended failed without a recorded reason."""


class RunFailed(TrainGridError):
    """A TrainingRun failed and explaining why failed too (its Unexplained state)."""


class RegionFailed(TrainGridError):
    """A fan-out's region finally failed (FinishFanout's error; the others' results stay)."""


class OutcomeNotRecorded(TrainGridError):
    """Recording a fan-out's outcome failed (its OutcomeNotRecorded state); the janitor
    records it once the execution has ended."""


# The database driver's errors (SQLAlchemy's names for them) when the campaign database cannot
# be reached: Lambda reports them by class name, and the record steps retry on these.
DATABASE_UNREACHABLE = ("OperationalError", "InterfaceError")


class InvalidPageToken(TrainGridError):
    """A service refused a page token: not one it issued, or issued for another query."""


class ResourceNotFound(TrainGridError):
    """An AWS resource we expected to exist does not (translated from the service's error)."""


class AwsServiceError(TrainGridError):
    """An AWS call failed after its retries; the message carries the service's code."""

    def __init__(self, service: str, operation: str, code: str, message: str) -> None:
        self.service, self.operation, self.code = service, operation, code
        super().__init__(f"{service}.{operation} failed: {code}: {message}")
