"""A "SageMaker Training Job State Change" event (from any region, forwarded home): wake the
fan-out branch waiting for the job."""

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_wait
from traingrid.observability import logger, metrics, tracer
from traingrid.settings import RegionWaitSettings
from traingrid.vocabulary.campaign_fanout import RegionWake

settings = RegionWaitSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=EventBridgeEvent)
def lambda_handler(event: EventBridgeEvent, context: LambdaContext) -> RegionWake:
    return region_wait.job_changed(event.detail, settings)
