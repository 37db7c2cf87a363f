"""Scheduled retraining: one fan-out per campaign with new data, once per schedule window."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import starts
from traingrid.observability import logger, metrics, tracer
from traingrid.settings import RetrainSettings

settings = RetrainSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The event's time is the scheduled time: the same for every delivery of one fire.
    return starts.retrain_on_schedule(event, settings)
