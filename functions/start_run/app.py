"""Start a TrainingRun when a manifest lands in the data bucket (S3 → EventBridge)."""

from typing import Any

from aws_lambda_powertools.utilities.data_classes import (
    S3EventBridgeNotificationEvent,
    event_source,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, metrics, tracer
from traingrid.settings import TriggerSettings
from traingrid.training.trigger import start_from_upload

settings = TriggerSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=S3EventBridgeNotificationEvent)
def lambda_handler(event: S3EventBridgeNotificationEvent, context: LambdaContext) -> dict[str, Any]:
    obj = event.detail.object
    return start_from_upload(event.detail.bucket.name, obj.key, obj.etag or "", settings,
                             obj.get("version-id"))
