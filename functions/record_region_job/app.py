"""Record one region's outcome in the campaign database.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import database_steps
from traingrid.observability import logger, tracer
from traingrid.settings import DatabaseSettings
from traingrid.vocabulary.campaign_fanout import RecordRegionJobEvent, RegionResult

settings = DatabaseSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: RecordRegionJobEvent, context: LambdaContext) -> RegionResult:
    return database_steps.record_region_job(event, settings)
