"""Fan-outs started on request (the API) and on schedule (scheduled retraining).

Markers start a fan-out as data lands (``records.register_dataset``). Scheduled retraining
catches what that did not train: every campaign with datasets registered since its last
successful run gets one fan-out, named from the campaign and the schedule's window, so the
schedule firing twice (EventBridge delivers at least once) starts nothing twice. A campaign
whose fan-out is still running is left alone: that run is training on its new data already.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from traingrid import clock, db
from traingrid.aws import stepfunctions
from traingrid.aws.secrets import connection_url
from traingrid.campaigns.fanout_request import (
    CAMPAIGN_ID_PATTERN,
    FanoutRequest,
    instance_count_problem,
    warmup_problems,
)
from traingrid.errors import RecordNotFound, RequestInvalid
from traingrid.naming import fanout_name, window_start
from traingrid.observability import logger, metrics
from traingrid.runs.submit import Submission, derived_name
from traingrid.runs.view import CAMPAIGN_FANOUT
from traingrid.settings import ApiSettings, RetrainSettings
from traingrid.validation import parse
from traingrid.vocabulary.statuses import RunStatus

SCHEDULE_SOURCE = "schedule"


def fanout_input(campaign: str, options: dict[str, Any], source: str) -> dict[str, Any]:
    """The CampaignFanout execution's input; no settling: the data is registered already."""
    return {"campaign": campaign, "settle_s": 0, "options": options,
            "trigger": {"source": source}}


def fanout_submission(campaign_id: str, body: Any, settings: ApiSettings, now: datetime,
                      idempotency_key: str | None = None) -> Submission:
    """A fan-out request for an existing campaign, validated (every problem at once) and
    named."""
    request = parse(FanoutRequest, body)
    # An id no campaign can have is not looked up: PostgreSQL refuses some text (NUL).
    counts: tuple[int, int | None] | None = None
    hyperparameters: dict[str, Any] = {}
    if re.fullmatch(CAMPAIGN_ID_PATTERN, campaign_id) is not None:
        with db.transaction(connection_url(settings.database)) as session:
            campaign = db.CampaignRepository(session).get(campaign_id)
            if campaign is not None:
                counts = (campaign.instance_count, campaign.min_instance_count)
                hyperparameters = dict(campaign.hyperparameters or {})
    if counts is None:
        raise RecordNotFound(f"No campaign is called {campaign_id!r}: list them with "
                             "GET /campaigns.")
    # What the fan-out's plan would refuse, or its every job, refused before anything starts.
    problem = instance_count_problem(request, *counts)
    problems = [problem] if problem else []
    problems += warmup_problems(request, hyperparameters)
    if problems:
        raise RequestInvalid(problems)
    options = request.plan_options()
    name = request.name or derived_name(campaign_id, options, now, idempotency_key)
    return Submission(CAMPAIGN_FANOUT, settings.campaign_fanout_state_machine_arn, name,
                      fanout_input(campaign_id, options, "api"))


def running_fanouts(machine: str) -> dict[str, list[str]]:
    """Campaign → the names of its fan-outs running now (settling, planning or training),
    from Step Functions itself: a fan-out is recorded in the database only once it plans."""
    found: dict[str, list[str]] = {}
    token = None
    while True:
        executions, token = stepfunctions.list_executions(machine, 100, token, RunStatus.RUNNING)
        for execution in executions:
            described = stepfunctions.describe_execution(execution["executionArn"])
            campaign = json.loads(described.get("input") or "{}").get("campaign")
            found.setdefault(campaign, []).append(execution["name"])
        if token is None:
            return found


class ScheduledEvent(BaseModel):
    """What scheduled retraining reads of the event its EventBridge schedule sends."""

    model_config = ConfigDict(extra="allow", frozen=True)

    time: str = Field(max_length=64, description="The scheduled time, like 2026-11-22T02:00:00Z.")

    @field_validator("time")
    @classmethod
    def _aware_iso_time(cls, value: str) -> str:
        try:
            clock.parse_iso(value).astimezone(UTC)
        except (ValueError, OverflowError):
            raise ValueError("must be an ISO 8601 time with its zone, like "
                             "2026-11-22T02:00:00Z") from None
        return value

    @property
    def scheduled_at(self) -> datetime:
        return clock.parse_iso(self.time)


def retrain_on_schedule(event: Any, settings: RetrainSettings) -> dict[str, Any]:
    """Retrain for the scheduled event's time (the same for every delivery of one fire); an
    event without one is rejected (logged and counted) and starts nothing."""
    try:
        scheduled = parse(ScheduledEvent, event, "scheduled event")
    except RequestInvalid as invalid:
        logger.warning("scheduled event rejected; nothing started",
                       extra={"problems": invalid.problems})
        metrics.add_metric(name="ScheduledEventRejected", unit="Count", value=1)
        return {"status": "rejected", "reason": invalid.message, "problems": invalid.problems}
    return retrain(scheduled.scheduled_at, settings)


def retrain(scheduled_at: datetime, settings: RetrainSettings) -> dict[str, Any]:
    """One fan-out per campaign with new data, named for the campaign and the window of
    ``scheduled_at`` (the scheduled event's time)."""
    minutes = settings.retrain_window_minutes
    machine = settings.campaign_fanout_state_machine_arn
    with db.transaction(connection_url(settings)) as session:
        due = db.DatasetRepository(session).campaigns_with_new_data()
    running = running_fanouts(machine) if due else {}
    outcome: dict[str, Any] = {"window": clock.iso(window_start(scheduled_at, minutes)),
                               "started": [], "already_started": [], "skipped": []}
    for campaign, new_datasets in due.items():
        name = fanout_name(campaign, scheduled_at, minutes, SCHEDULE_SOURCE)
        entry = {"campaign": campaign, "new_datasets": new_datasets, "name": name}
        others = [n for n in running.get(campaign, []) if n != name]
        if name in running.get(campaign, []):
            outcome["already_started"].append(entry)
        elif others:
            entry["reason"] = f"its fan-out {others[0]} is still running and trains on new data"
            outcome["skipped"].append(entry)
        else:
            execution = stepfunctions.start_named_execution(
                machine, name, fanout_input(campaign, {}, SCHEDULE_SOURCE))
            entry["execution_arn"] = execution["execution_arn"]
            outcome["started" if execution["started"] else "already_started"].append(entry)
    logger.info("scheduled retraining", extra=outcome)
    metrics.add_metric(name="ScheduledFanoutStarted", unit="Count",
                       value=len(outcome["started"]))
    return outcome
