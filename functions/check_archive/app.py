"""CheckArchive: the job exported its outputs as it ended; if S3 holds every file of its output
index, write runs/<run>/manifest.json and let the file system go, else say what is missing for
the export task to copy.

Its event is the state machine's own state, typed as a TypedDict checked by mypy, not parsed
at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training import manifest
from traingrid.vocabulary.training_run import ArchiveState, CheckArchiveEvent


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: CheckArchiveEvent, context: LambdaContext) -> ArchiveState:
    return manifest.check_archive(event)
