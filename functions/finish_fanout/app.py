"""Record the fan-out's outcome; it fails only if a region finally failed.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import database_steps
from traingrid.observability import logger, tracer
from traingrid.settings import DatabaseSettings
from traingrid.vocabulary.campaign_fanout import FanoutOutcome, FinishFanoutEvent

settings = DatabaseSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: FinishFanoutEvent, context: LambdaContext) -> FanoutOutcome:
    return database_steps.finish_fanout(event, settings)
