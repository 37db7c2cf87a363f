"""Record a TrainingRun's outcome, timings and artifact location in the campaign database.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, metrics, tracer
from traingrid.settings import DatabaseSettings
from traingrid.training import run_record
from traingrid.vocabulary.training_run import RecordedRun, RecordRunEvent

settings = DatabaseSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: RecordRunEvent, context: LambdaContext) -> RecordedRun:
    return run_record.record_run(event, settings)
