"""The training job failed: submit another attempt (fewer nodes, or resuming), or go on.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training import steps
from traingrid.vocabulary.training_run import NextAttemptEvent, PlanJob


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: NextAttemptEvent, context: LambdaContext) -> PlanJob:
    return steps.next_attempt(event)
