"""Turn a failed TrainingRun's state into one readable error and cause for its Fail state.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training.failures import explain
from traingrid.vocabulary.training_run import Explained, ExplainFailureEvent


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: ExplainFailureEvent, context: LambdaContext) -> Explained:
    explained = explain(event["execution"])
    logger.warning("run failed", extra=explained)
    return explained
