"""Register the dataset a ``_READY`` marker completes and start its campaign's fan-out."""

from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.data_classes import (
    S3EventBridgeNotificationEvent,
    event_source,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import database_steps
from traingrid.observability import logger, metrics, tracer
from traingrid.settings import RegistrationSettings

settings = RegistrationSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=S3EventBridgeNotificationEvent)
def lambda_handler(event: S3EventBridgeNotificationEvent, context: LambdaContext) -> dict[str, Any]:
    landed_at = datetime.fromisoformat(event.time.replace("Z", "+00:00"))
    return database_steps.register_dataset(event.detail.bucket.name, event.detail.object.key,
                                    event.region, landed_at, settings)
