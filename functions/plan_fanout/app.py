"""Plan a campaign's fan-out: one SageMaker job per region, from one SQL query.

The event is a TypedDict (PlanFanoutEvent); a requested fan-out's options, which whoever
starts an execution writes, are parsed once with the pydantic FanoutRequest model, as
Powertools' parser would, but reporting every problem at once as RequestInvalid.
"""

import os

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import database_steps
from traingrid.observability import logger, tracer
from traingrid.settings import PlanningSettings
from traingrid.vocabulary.campaign_fanout import FanoutPlan, PlanFanoutEvent

settings = PlanningSettings.from_env()
MAX_CONCURRENCY = int(os.environ.get("FANOUT_MAX_CONCURRENCY", "10"))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: PlanFanoutEvent, context: LambdaContext) -> FanoutPlan:
    return database_steps.plan_fanout(event, settings, MAX_CONCURRENCY)
