"""Wait for the multi-node training job: park the task token, check the job once.

Its event is the state machine's own state, typed as a TypedDict checked by mypy: the state
machine wrote it, so there is nothing to validate at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, metrics, tracer
from traingrid.settings import CompletionSettings
from traingrid.training import completion
from traingrid.vocabulary.training_run import AwaitTrainingJobEvent, TrainingWaitCheck

settings = CompletionSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: AwaitTrainingJobEvent, context: LambdaContext) -> TrainingWaitCheck:
    return completion.await_job(event, settings)
