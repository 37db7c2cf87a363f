"""Reading runs of both pipelines: one run by name, recent runs, a run's logs.

A run is a Step Functions execution of the TrainingRun or the CampaignFanout state machine; a
name is looked up in that order.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from traingrid import clock, db
from traingrid.aws import batch, cloudwatch, logs, s3, sagemaker, stepfunctions
from traingrid.aws.secrets import connection_url
from traingrid.errors import InvalidPageToken, ResourceNotFound, RunNotFound, TrainGridError
from traingrid.observability import logger
from traingrid.runs import listing
from traingrid.runs.view import (
    CAMPAIGN_FANOUT,
    TRAINING_RUN,
    branch_executions,
    fanout_jobs,
    run_view,
    summary,
)
from traingrid.settings import ApiSettings
from traingrid.training.plan import outputs_prefix
from traingrid.vocabulary.statuses import RunStatus

if TYPE_CHECKING:
    from traingrid.runs.metrics import MetricsQuery

# What Step Functions accepts as an execution name (and so what a run can be called).
EXECUTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
PIPELINES = {"training": TRAINING_RUN, "campaign": CAMPAIGN_FANOUT}
MAIN_NODE_LOG = "logs/main-node.log"
LOG_LINES = 200


class RunReader:
    def __init__(self, settings: ApiSettings) -> None:
        self.settings = settings
        self.machines = {TRAINING_RUN: settings.training_run_state_machine_arn,
                         CAMPAIGN_FANOUT: settings.campaign_fanout_state_machine_arn}

    def find(self, name: str) -> tuple[str, dict[str, Any]]:
        """(pipeline, DescribeExecution) of the run called ``name``; RunNotFound if none."""
        if EXECUTION_NAME.fullmatch(name):
            for pipeline, machine in self.machines.items():
                try:
                    arn = stepfunctions.execution_arn(machine, name)
                    return pipeline, stepfunctions.describe_execution(arn)
                except ResourceNotFound:
                    continue
        raise RunNotFound(f"No run is named {name!r}: list recent runs with GET /runs.")

    def describe(self, name: str) -> dict[str, Any]:
        pipeline, description = self.find(name)
        events = stepfunctions.execution_history(description["executionArn"])
        recorded = (self._recorded_cost(description["executionArn"])
                    if pipeline == CAMPAIGN_FANOUT and description["status"] != RunStatus.RUNNING
                    else None)
        branches = (self._branch_events(events)
                    if pipeline == CAMPAIGN_FANOUT and description["status"] == RunStatus.RUNNING
                    else None)
        return run_view(pipeline, description, events, self.settings.data_bucket,
                        batch.describe_jobs, recorded, branches)

    @staticmethod
    def _branch_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The histories of a running fan-out's region branches, where each region's job
        stands; a branch that cannot be read shows as its last state in the fan-out's."""
        found: list[dict[str, Any]] = []
        for arn in branch_executions(events):
            try:
                found += stepfunctions.execution_history(arn)
            except TrainGridError as error:
                logger.warning("branch history not read", extra={"execution_arn": arn,
                                                                 "error": str(error)})
        return found

    def _recorded_cost(self, execution_arn: str) -> dict[str, Any] | None:
        """The receipt an ended fan-out recorded with its run; None (priced as in flight) if
        it has none or the database cannot be read."""
        try:
            with db.transaction(connection_url(self.settings.database)) as session:
                run = db.RunRepository(session).get(execution_arn)
                return None if run is None else run.cost
        except (db.SQLAlchemyError, TrainGridError) as error:
            logger.warning("recorded cost not read", extra={"error": str(error)})
            return None

    def recent(self, limit: int, cursor: str | None = None, pipeline: str | None = None,
               status: str | None = None) -> dict[str, Any]:
        """A page of runs, newest first, and the token of the next page."""
        keys = [PIPELINES[pipeline]] if pipeline else list(self.machines)

        def fetch(key: str, token: str | None, size: int
                  ) -> tuple[list[dict[str, Any]], str | None]:
            try:
                return stepfunctions.list_executions(self.machines[key], size, token, status)
            except InvalidPageToken:
                raise listing.invalid_cursor("is not a token this API returned") from None

        runs, next_token = listing.newest_first(
            fetch, keys, limit, cursor, {"pipeline": pipeline, "status": status})
        return {"runs": [summary(key, execution) for key, execution in runs],
                "next_token": next_token}

    def logs(self, name: str) -> dict[str, Any]:
        """Why the run ended as it did, and the training log: the main node's CloudWatch Logs
        stream while its job has one, else the copy archived with the run's outputs."""
        pipeline, description = self.find(name)
        found: dict[str, Any] = {
            "name": name, "pipeline": pipeline, "status": description["status"],
            "error": description.get("error"), "cause": description.get("cause"),
        }
        if pipeline == TRAINING_RUN:
            found["log"] = self._training_log(name)
        else:
            found["log"] = None
            found["note"] = ("Each region's SageMaker job logs to /aws/sagemaker/TrainingJobs "
                             "in the region where it trained (stream <job name>/algo-*).")
        return found

    def metrics(self, name: str, wanted: MetricsQuery) -> dict[str, Any]:
        """The run's training curves (``traingrid.runs.metrics``): a TrainingRun's nodes'; a
        fan-out's, each region's SageMaker job's, from CloudWatch in its region."""
        from traingrid.runs import metrics

        pipeline, description = self.find(name)
        found = {"name": name, "pipeline": pipeline, "status": description["status"]}
        if pipeline == TRAINING_RUN:
            # Only its nodes' files, and points of its lifetime: the job writes them.
            return found | metrics.training_run_curves(
                self.settings.data_bucket, name, wanted,
                metrics.run_nodes(description.get("input")), description["startDate"])
        events = stepfunctions.execution_history(description["executionArn"])
        if description["status"] == RunStatus.RUNNING:
            events = events + self._branch_events(events)  # where each region's job stands
        planned, reported = fanout_jobs(description, events)
        return found | metrics.fanout_curves(
            name, planned, reported, wanted, clock.now(), sagemaker.describe_training_job,
            sagemaker.training_jobs_named, cloudwatch.metric_data)

    def _training_log(self, name: str) -> dict[str, Any] | None:
        queue, group = self.settings.training_job_queue, self.settings.training_job_log_group
        job = batch.find_job_by_name(queue, name) if queue else None
        stream = batch.main_node_log_stream(job["jobId"]) if job else None
        if group and stream:
            try:
                events = logs.tail(group, stream, LOG_LINES)
                return {"source": f"cloudwatch-logs:{group}:{stream}",
                        "lines": [e["message"] for e in events]}
            except ResourceNotFound:
                pass  # the job never started, or its stream has expired: try the archive
        bucket, key = self.settings.data_bucket, outputs_prefix(name) + MAIN_NODE_LOG
        text = s3.read_text_tail(bucket, key)
        if text is None:
            return None
        return {"source": f"s3://{bucket}/{key}", "lines": text.splitlines()[-LOG_LINES:]}

