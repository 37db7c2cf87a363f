"""Record a TrainingRun's outcome, timings and artifact location in the campaign database."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, metrics, tracer
from traingrid.settings import DatabaseSettings
from traingrid.training import run_record

settings = DatabaseSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_record.record_run(event, settings)
