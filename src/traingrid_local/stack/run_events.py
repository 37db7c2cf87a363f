"""The run-status events a deployment's runs published, as a user's rule would receive them.

Deploying TrainGrid into the emulator adds what a user adds on AWS to watch the runs: a rule on
the default event bus matching ``source: traingrid`` and ``detail-type: TrainGrid Run Status
Change``, with a CloudWatch Logs group as its target (EventBridge writes each event there as
one log event, the event's JSON; such a group's name starts with ``/aws/events/``, as
EventBridge requires of a log-group target). :func:`published` reads them back without
consuming them: the demo's report lists a run's, and the tests validate each against
``schema/events/run-status-change.json``.
"""

from __future__ import annotations

import json
from typing import Any

from traingrid.notifications.run_status import DETAIL_TYPE, SOURCE
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

NAME = "traingrid-run-status-events"
LOG_GROUP = f"/aws/events/{NAME}"
PATTERN = {"source": [SOURCE], "detail-type": [DETAIL_TYPE]}


def observe(emulator: Emulator) -> str:
    """The rule and its log group, in the emulator's home region; the group's ARN."""
    logs, events = emulator.client("logs"), emulator.client("events")
    logs.create_log_group(logGroupName=LOG_GROUP)
    arn = (f"arn:aws:logs:{emulator.region}:{ACCOUNT_ID}:log-group:{LOG_GROUP}")
    events.put_rule(Name=NAME, EventPattern=json.dumps(PATTERN), State="ENABLED")
    events.put_targets(Rule=NAME, Targets=[{"Id": "log-group", "Arn": arn}])
    return arn


def published(emulator: Emulator, execution_arns: list[str] | None = None
              ) -> list[dict[str, Any]]:
    """Every event delivered (of ``execution_arns``' runs only, if given), oldest first."""
    pages = emulator.client("logs").get_paginator("filter_log_events").paginate(
        logGroupName=LOG_GROUP)
    found = [json.loads(e["message"]) for page in pages for e in page["events"]]
    if execution_arns is not None:
        found = [e for e in found if e["detail"]["execution_arn"] in set(execution_arns)]
    return sorted(found, key=lambda event: event["detail"]["time"])


def summary(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the report lists of each event: its detail's who, what and when."""
    keep = ("time", "kind", "name", "status", "region", "error")
    return [{k: event["detail"][k] for k in keep if k in event["detail"]} for event in events]
