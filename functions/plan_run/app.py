"""Validate a TrainingRun request and plan it (the state machine's first step).

The event is a TypedDict (PlanRunEvent); its request, which whoever starts an execution
writes, is parsed once with the pydantic request model, as Powertools' parser would, but
reporting every problem at once as RequestInvalid. This function loads pydantic anyway.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.settings import Settings
from traingrid.training import plan_step
from traingrid.vocabulary.training_run import MeasuringPlan, PlanRunEvent, RunPlan

settings = Settings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: PlanRunEvent, context: LambdaContext) -> RunPlan | MeasuringPlan:
    return plan_step.plan(event, settings, context.get_remaining_time_in_millis())
