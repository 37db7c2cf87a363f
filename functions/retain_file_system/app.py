"""Keep a file system whose archive failed, tagged with its expiry.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.settings import Settings
from traingrid.training import steps
from traingrid.vocabulary.training_run import Retained, RetainFileSystemEvent

settings = Settings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: RetainFileSystemEvent, context: LambdaContext) -> Retained:
    return steps.retain_file_system(event, settings)
