"""The wait for the training job: completed by an event, checked on every wake-up.

After submitting the job the state machine waits on a task token (``AwaitTrainingJob``, a
``lambda:invoke.waitForTaskToken`` task). The token is parked under the job's id. A Batch
"Job State Change" event wakes the wait (:func:`job_changed`); so does the wait's own timeout,
after which the state machine enters ``AwaitTrainingJob`` again (:func:`await_job`); so does
the janitor's next pass when the job has ended (``janitor/parked_waits.py``), so a lost event
costs at most one janitor interval and the timeout can be long. Either way the job is described —
events are hints, DescribeJobs is the truth — and the wait is completed only when the job is
done, was just terminated, or the wait's timeout must change (a limit is near). Otherwise it
stays parked and costs no state transition.

``await_job`` takes AwaitTrainingJobEvent, a TypedDict checked by mypy, not parsed at run time:
this function starts cold on every wait (pydantic would cost it ~80 ms), and its payload is
the state machine's own state.
"""

from __future__ import annotations

from typing import Any

from traingrid import clock
from traingrid.aws import batch, stepfunctions, task_tokens
from traingrid.aws import scaling as aws_capacity
from traingrid.aws.task_tokens import ParkedWait
from traingrid.errors import AwsServiceError
from traingrid.observability import logger, metrics
from traingrid.settings import CompletionSettings
from traingrid.training import capacity, waits
from traingrid.vocabulary.statuses import BatchJobStatus
from traingrid.vocabulary.training_run import AwaitTrainingJobEvent, TrainingWaitCheck


def await_job(event: AwaitTrainingJobEvent, settings: CompletionSettings) -> TrainingWaitCheck:
    """Park the execution's token for the job, then check the job once."""
    job = event["job"]
    wait = ParkedWait(job["id"], event["token"], {
        "job": job, "plan_job": event["plan_job"], "limits": event["limits"],
    })
    # Park before checking: an event that lands during the check then finds the token.
    task_tokens.park(settings.job_tokens_table, wait.job_id, wait.token, wait.context,
                     clock.now().timestamp(), max(int(job.get("wait_s", 0)),
                                                  settings.fallback_s))
    return check_and_wake(wait, settings)


def job_changed(job_id: str, status: str, settings: CompletionSettings) -> dict[str, Any]:
    """A Batch event about ``job_id``: wake the wait parked for it, if any."""
    wait = task_tokens.parked(settings.job_tokens_table, job_id)
    if wait is None:
        # Not a TrainGrid wait (a node of the job, or the wait was already completed).
        return {"outcome": "no-wait", "job_id": job_id, "status": status}
    metrics.add_metric(name="JobEventReceived", unit="Count", value=1)
    return dict(check_and_wake(wait, settings))


def check_and_wake(wait: ParkedWait, settings: CompletionSettings) -> TrainingWaitCheck:
    description = batch.describe_job(wait.job_id)
    state, terminate = assess(wait, description, settings.fallback_s,
                              capacity_shortage(description))
    if terminate:
        batch.terminate_job(state.id, state.cause or "terminated by TrainGrid")
        state.terminated = True
        state.wait_s = waits.next_wait(state, wait.context["limits"], settings.fallback_s)
    if not (state.done or terminate or state.wait_s != wait.context["job"].get("wait_s", 0)):
        return {"outcome": "waiting", "job": state.as_output()}
    return wake(wait, state, settings.job_tokens_table)


def capacity_shortage(description: dict[str, Any]) -> capacity.Shortage | None:
    """AWS's word that a RUNNABLE job will get no nodes, if it has said so. Only a hint: a
    failure to read it leaves the job to its runnable limit."""
    if description.get("status") != BatchJobStatus.RUNNABLE:
        return None
    try:
        environments = aws_capacity.compute_environments(description["jobQueue"])
        activities = aws_capacity.scaling_activities()
    except AwsServiceError as error:
        logger.warning(f"capacity of job {description.get('jobId')} not read: {error}")
        return None
    return capacity.diagnose(description, environments, activities)


def assess(wait: ParkedWait, description: dict[str, Any], fallback_s: int,
           shortage: capacity.Shortage | None = None) -> tuple[waits.JobState, bool]:
    """The wait's next state from the job's description, and whether the job must be
    terminated: the one decision behind every wake-up (an event, a timeout, a reconcile)."""
    state = waits.JobState.of(wait.context["job"])
    plan_job, limits = wait.context["plan_job"], wait.context["limits"]
    now_ms = int(clock.now().timestamp() * 1000)
    terminate = waits.check_training_job(state, description, plan_job, limits, now_ms,
                                         shortage)
    state.wait_s = waits.next_wait(state, limits, fallback_s)
    return state, terminate


def wake(wait: ParkedWait, state: waits.JobState, table: str) -> TrainingWaitCheck:
    """Complete the wait with the job's state and forget it; a token already completed (the
    event and a reconcile both saw the end, or the wait timed out) is left quietly."""
    completed = stepfunctions.complete_task(wait.token, state.as_output())
    task_tokens.forget(table, state.id, wait.token)
    outcome = "completed" if completed else "stale-token"
    logger.info(f"training wait {outcome}: job {state.id} is {state.status}",
                extra={"job": state.as_output()})
    return {"outcome": outcome, "job": state.as_output()}
