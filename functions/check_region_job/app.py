"""One check of a region's training job (the region's poll loop).

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_steps
from traingrid.observability import logger, tracer
from traingrid.vocabulary.campaign_fanout import RegionJob, RegionJobEvent


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: RegionJobEvent, context: LambdaContext) -> RegionJob:
    return region_steps.check_region_job(event)
