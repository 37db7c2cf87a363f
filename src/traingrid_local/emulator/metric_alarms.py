"""Adaptation (moto 5.2.5): CloudWatch evaluates alarms on a Metrics Insights query, and each
series of a query that groups them is a contributor with a state of its own.

moto keeps alarms and evaluates none. Here an alarm whose ``Metrics`` is one Metrics Insights
query (the template's ``StalledRunAlarm``) is evaluated every ``Period`` of simulated time after
its creation, by CloudWatch's rules (``emulator/metric_insights.py``), over the metrics in moto's
CloudWatch (the nodes' and the functions' embedded metric format lines,
``emulator/embedded_metrics.py``). The evaluations are made when someone looks (DescribeAlarms,
DescribeAlarmContributors, DescribeAlarmHistory), for every period since the last look: the
states CloudWatch would have reached at those moments, computed late, so that no
minute-by-minute alarm holds the simulated clock back. An alarm starts INSUFFICIENT_DATA, and
an update keeps its state (PutMetricAlarm).

Each change is a DescribeAlarmHistory item (``StateUpdate`` for the alarm,
``AlarmContributorStateUpdate`` for a contributor); DescribeAlarmContributors lists those in
ALARM. Actions are not taken: the history says when they would be.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch.exceptions import ResourceNotFoundException
from moto.cloudwatch.models import (
    Alarm,
    CloudWatchBackend,
    MetricAggregatedDatum,
    MetricDatum,
)
from moto.cloudwatch.responses import CloudWatchResponse
from moto.core.responses import ActionResult

from traingrid_local.emulator.attached import Attached
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.metric_insights import (
    Change,
    Group,
    Observation,
    Query,
    QueryError,
    Rules,
    State,
    bucket,
    parse,
    step,
    window,
)
from traingrid_local.emulator.patching import PATCHES


@dataclass
class Evaluation:
    """What the emulator keeps of an alarm's evaluations."""

    since: datetime  # created (or found) then: the first evaluation is a period later
    state: State = field(default_factory=State)
    evaluated: datetime | None = None
    history: list[dict[str, Any]] = field(default_factory=list)


EVALUATION: Attached[Evaluation] = Attached("evaluation")
_LOCK = threading.RLock()


def _query_of(alarm: Alarm) -> tuple[Query, int] | None:
    """The alarm's Metrics Insights query and period, if it is one the emulator evaluates."""
    queries = [q for q in (alarm.metric_data_queries or []) if q.return_data]
    if len(queries) != 1 or not queries[0].expression:
        return None
    try:
        return parse(queries[0].expression), int(queries[0].period or 60)
    except (QueryError, ValueError):
        return None


def _rules(alarm: Alarm) -> Rules:
    periods = int(alarm.evaluation_periods)
    return Rules(threshold=float(alarm.threshold), comparison=alarm.comparison_operator,
                 evaluation_periods=periods,
                 datapoints_to_alarm=int(alarm.datapoints_to_alarm or periods),
                 treat_missing=alarm.treat_missing_data or "missing")


def _utc(value: datetime | str) -> datetime:
    """A time as moto holds it (ISO text, or a datetime without a zone: UTC), with UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _observations(backend: CloudWatchBackend) -> list[Observation]:
    found = []
    for datum in list(backend.metric_data):
        seconds = _utc(datum.timestamp).timestamp()
        dimensions = {str(d.name): str(d.value) for d in datum.dimensions}
        if isinstance(datum, MetricAggregatedDatum):
            stats = (datum.sample_count, datum.sum, datum.min, datum.max)
        elif isinstance(datum, MetricDatum):
            stats = (1.0, datum.value, datum.value, datum.value)
        else:
            continue
        found.append(Observation(datum.namespace, datum.name, dimensions, seconds,
                                 *map(float, stats)))
    return found


def _contributor_id(group: Group) -> str:
    return hashlib.sha256(json.dumps(group).encode()).hexdigest()[:16]


def _record(alarm: Alarm, evaluation: Evaluation, change: Change) -> None:
    data = json.dumps({"version": "1.0", "oldState": {"stateValue": change.old},
                       "newState": {"stateValue": change.new, "stateReason": change.reason}})
    item: dict[str, Any] = {
        "AlarmName": alarm.name, "AlarmType": "MetricAlarm", "Timestamp": change.at,
        "HistoryData": data}
    if change.contributor is None:
        item.update(HistoryItemType="StateUpdate",
                    HistorySummary=f"Alarm updated from {change.old} to {change.new}")
        alarm.update_state(change.reason, json.dumps({"version": "1.0"}), change.new)
        alarm.state_updated_timestamp = change.at
    else:
        item.update(HistoryItemType="AlarmContributorStateUpdate",
                    HistorySummary=f"Alarm contributor updated from {change.old} to "
                                   f"{change.new}",
                    AlarmContributorId=_contributor_id(change.contributor),
                    AlarmContributorAttributes=dict(change.contributor))
    evaluation.history.append(item)


def bring_up_to_date(backend: CloudWatchBackend, now: datetime | None = None) -> None:
    """Every evaluation due since the last one, up to ``now`` (the simulated clock's)."""
    now = now or CLOCK.now()
    with _LOCK:
        observations: list[Observation] | None = None
        for alarm in list(backend.alarms.values()):
            evaluation, found = EVALUATION.get(alarm), _query_of(alarm)
            if evaluation is None or found is None:
                continue
            query, period = found
            start = (evaluation.evaluated or evaluation.since).timestamp()
            first = (int(start // period) + 1) * period
            last = int(now.timestamp() // period) * period
            if last < first:
                continue
            observations = observations if observations is not None else _observations(backend)
            rules = _rules(alarm)
            series = bucket(query, observations, period)
            for at in range(first, last + 1, period):
                moment = datetime.fromtimestamp(at, UTC)
                returned = window(query, series, at, rules.evaluation_periods, period)
                for change in step(evaluation.state, rules, bool(query.group_by), returned,
                                   moment):
                    _record(alarm, evaluation, change)
            evaluation.evaluated = datetime.fromtimestamp(last, UTC)


def _put_metric_alarm(previous: Any) -> Any:
    def put_metric_alarm(self: CloudWatchBackend, *args: Any, **kwargs: Any) -> Alarm:
        name = kwargs["name"] if "name" in kwargs else args[0]
        before = self.alarms.get(name)
        alarm: Alarm = previous(self, *args, **kwargs)
        kept = EVALUATION.get(before) if before is not None else None
        if before is not None and kept is not None:
            # An update leaves the alarm's state as it was (PutMetricAlarm).
            alarm.state_value, alarm.state_reason = before.state_value, before.state_reason
            EVALUATION.set(alarm, kept)
        else:
            # "When this operation creates an alarm, the alarm state is immediately set to
            # INSUFFICIENT_DATA" (PutMetricAlarm).
            alarm.state_value = "INSUFFICIENT_DATA"
            EVALUATION.set(alarm, Evaluation(since=CLOCK.now()))
        return alarm

    return put_metric_alarm


def _evaluated(previous: Any) -> Any:
    def describe_alarms(self: CloudWatchResponse) -> ActionResult:
        bring_up_to_date(self.cloudwatch_backend)
        result: ActionResult = previous(self)
        return result

    return describe_alarms


def _alarm(response: CloudWatchResponse) -> tuple[Alarm, Evaluation]:
    backend = response.cloudwatch_backend
    bring_up_to_date(backend)
    alarm = backend.alarms.get(response._get_param("AlarmName"))
    if alarm is None:
        raise ResourceNotFoundException()
    return alarm, EVALUATION.get(alarm) or Evaluation(since=CLOCK.now())


def describe_alarm_contributors(self: CloudWatchResponse) -> ActionResult:
    _, evaluation = _alarm(self)
    return ActionResult({"AlarmContributors": [
        {"ContributorId": _contributor_id(group), "ContributorAttributes": dict(group),
         "StateReason": reason, "StateTransitionedTimestamp": since}
        for group, (value, reason, since) in evaluation.state.contributors.items()
        if value == "ALARM"]})


def describe_alarm_history(self: CloudWatchResponse) -> ActionResult:
    backend = self.cloudwatch_backend
    bring_up_to_date(backend)
    name, kind = self._get_param("AlarmName"), self._get_param("HistoryItemType")
    contributor = self._get_param("AlarmContributorId")
    low, high = (self._get_param(k) for k in ("StartDate", "EndDate"))
    low, high = (None if v is None else _utc(v) for v in (low, high))
    items = [item for alarm in backend.alarms.values() if name in (None, alarm.name)
             for item in (EVALUATION.get(alarm) or Evaluation(since=CLOCK.now())).history
             if kind in (None, item["HistoryItemType"])
             and contributor in (None, item.get("AlarmContributorId"))
             and (low is None or item["Timestamp"] >= low)
             and (high is None or item["Timestamp"] <= high)]
    items.sort(key=lambda i: i["Timestamp"],
               reverse=self._get_param("ScanBy", "TimestampDescending") == "TimestampDescending")
    return ActionResult({"AlarmHistoryItems": items[:int(self._get_param("MaxRecords") or 100)]})


def apply() -> None:
    PATCHES.wrap(CloudWatchBackend, "put_metric_alarm", _put_metric_alarm)
    PATCHES.wrap(CloudWatchResponse, "describe_alarms", _evaluated)
    PATCHES.add(CloudWatchResponse, "describe_alarm_contributors", describe_alarm_contributors)
    PATCHES.add(CloudWatchResponse, "describe_alarm_history", describe_alarm_history)
