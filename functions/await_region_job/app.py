"""Wait for a region's SageMaker job: park the task token, look at the job once.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_wait
from traingrid.observability import logger, metrics, tracer
from traingrid.settings import RegionWaitSettings
from traingrid.vocabulary.campaign_fanout import AwaitRegionJobEvent, RegionWake

settings = RegionWaitSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: AwaitRegionJobEvent, context: LambdaContext) -> RegionWake:
    return region_wait.await_job(event, settings)
