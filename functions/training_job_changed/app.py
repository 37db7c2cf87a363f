"""A Batch "Job State Change" event: wake the training wait parked for the job."""

from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, metrics, tracer
from traingrid.settings import CompletionSettings
from traingrid.training import completion

settings = CompletionSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=EventBridgeEvent)
def lambda_handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, Any]:
    return completion.job_changed(event.detail["jobId"], event.detail["status"], settings)
