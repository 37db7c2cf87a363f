"""Scheduled retraining: one fan-out per campaign with new data, once per schedule window."""

from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import starts
from traingrid.observability import logger, metrics, tracer
from traingrid.settings import RetrainSettings

settings = RetrainSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=EventBridgeEvent)
def lambda_handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, Any]:
    # The event's time is the scheduled time: the same for every delivery of one fire.
    scheduled_at = datetime.fromisoformat(event.time.replace("Z", "+00:00"))
    return starts.retrain(scheduled_at, settings)
