"""Start one region's SageMaker MPI training job, with that region's client.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_steps
from traingrid.observability import logger, tracer
from traingrid.settings import LaunchSettings
from traingrid.vocabulary.campaign_fanout import LaunchRegionJobEvent, RegionJob

settings = LaunchSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: LaunchRegionJobEvent, context: LambdaContext) -> RegionJob:
    account = context.invoked_function_arn.split(":")[4]
    return region_steps.launch_region_job(event, settings, account)
