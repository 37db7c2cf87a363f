"""CloudWatch's evaluation of an alarm on a Metrics Insights query, as the emulator makes it:
the query's series, M out of N periods, missing data, and each contributor of a query that
groups its series with a state of its own. Why the stalled-run alarm groups by run: one job
can print any run's StalledSeconds, and one series held in ALARM would swallow another run's
stall."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.metric_insights import (
    Change,
    Observation,
    QueryError,
    Rules,
    State,
    bucket,
    parse,
    step,
    window,
)

from .conftest import StartEmulator
from .helpers import wait_until

T0 = 1_795_000_020  # a whole minute
# The template's query (stacks/operations.yaml), and the one it had before it grouped by run.
PER_RUN = ("SELECT MAX(StalledSeconds) FROM SCHEMA(TrainGrid, node, run) GROUP BY run "
           "ORDER BY MAX() DESC")
ONE_SERIES = "SELECT MAX(StalledSeconds) FROM SCHEMA(TrainGrid, node, run)"
RULES = Rules(threshold=900, comparison="GreaterThanThreshold", evaluation_periods=3,
              datapoints_to_alarm=2, treat_missing="notBreaching")

Point = tuple[int, str, str, float]  # (minute, run, node, StalledSeconds)


def _observation(minute: int, run: str, node: str, value: float) -> Observation:
    return Observation("TrainGrid", "StalledSeconds", {"run": run, "node": node},
                       T0 + 60 * minute + 1, 1, value, value, value)


def _evaluate(expression: str, points: list[Point], minutes: int) -> list[Change]:
    """Every change the alarm's evaluations make, one a minute."""
    query, state, changes = parse(expression), State(), []
    series = bucket(query, [_observation(*p) for p in points], 60)
    for minute in range(1, minutes + 1):
        at = T0 + 60 * minute
        changes += step(state, RULES, bool(query.group_by),
                        window(query, series, at, RULES.evaluation_periods, 60),
                        datetime.fromtimestamp(at, UTC))
    return changes


def _minute(change: Change) -> int:
    return int((change.at.timestamp() - T0) // 60)


def _stalls_after_ten_minutes(run: str = "run-b") -> list[Point]:
    """A node that stepped until minute 10: its heartbeat's StalledSeconds grows from then."""
    return [(m, run, "ip-10-0-1-7", max(0, m - 10) * 60.0) for m in range(45)]


def _forged_run_held_in_alarm() -> list[Point]:
    return [(m, "ghost", "x", 86_400.0) for m in range(45)]


def test_a_run_held_in_alarm_swallows_another_runs_stall_in_one_series() -> None:
    changes = _evaluate(ONE_SERIES, _forged_run_held_in_alarm() + _stalls_after_ten_minutes(),
                        45)
    # The forged run's figure put the alarm in ALARM at once; run-b's stall changes nothing.
    assert [(c.new, _minute(c)) for c in changes] == [("OK", 1), ("ALARM", 2)]


def test_each_run_is_a_contributor_whose_stall_is_a_change_of_its_own() -> None:
    changes = _evaluate(PER_RUN, _forged_run_held_in_alarm() + _stalls_after_ten_minutes(), 45)
    by_run = {(c.contributor, c.new): _minute(c) for c in changes if c.contributor}
    # run-b's minutes 26 and 27 are over 900 s: two of three periods breach at minute 28.
    assert by_run == {((("run", "ghost"),), "ALARM"): 2, ((("run", "run-b"),), "ALARM"): 28}
    assert [(c.new, _minute(c)) for c in changes if c.contributor is None] == [("OK", 1),
                                                                              ("ALARM", 2)]


def test_a_forged_low_figure_does_not_lower_a_runs_largest() -> None:
    """MAX is the largest observation of the period: points added under a run's own name and
    node, however many, cannot bring its stall under the threshold."""
    forged = [(m, "run-b", "ip-10-0-1-7", 0.0) for m in range(45) for _ in range(5)]
    for expression in (PER_RUN, ONE_SERIES):
        changes = _evaluate(expression, _stalls_after_ten_minutes() + forged, 45)
        assert {_minute(c) for c in changes if c.new == "ALARM"} == {28}, expression


def test_a_run_that_ends_reports_nothing_and_its_contributor_goes_back_to_ok() -> None:
    stalled_then_ended = [p for p in _stalls_after_ten_minutes() if p[0] < 30]
    changes = _evaluate(PER_RUN, stalled_then_ended, 45)
    # Minute 32 reads minutes 29-31: one point, one breach; then no point at all.
    assert [(c.new, _minute(c)) for c in changes if c.contributor] == [("ALARM", 28),
                                                                       ("OK", 32)]
    assert [(c.new, _minute(c)) for c in changes if c.contributor is None][-1] == ("OK", 32)


def test_the_query_matches_the_schemas_dimensions_exactly() -> None:
    query = parse(PER_RUN)
    assert (query.function, query.metric, query.namespace) == ("MAX", "StalledSeconds",
                                                               "TrainGrid")
    assert (query.group_by, query.order, query.descending) == (("run",), "MAX", True)
    assert query.matches("TrainGrid", "StalledSeconds", {"run": "a", "node": "b"})
    assert not query.matches("TrainGrid", "StalledSeconds", {"run": "a"})
    assert not query.matches("TrainGrid", "StalledSeconds", {"run": "a", "node": "b", "x": "c"})
    assert not query.matches("Other", "StalledSeconds", {"run": "a", "node": "b"})
    narrowed = parse('select min("Loss") from SCHEMA("TrainGrid", run) '
                     "WHERE run = 'a' AND run = 'a' LIMIT 3")
    assert (narrowed.function, narrowed.metric, narrowed.where, narrowed.limit) == (
        "MIN", "Loss", (("run", "a"),) * 2, 3)
    assert narrowed.matches("TrainGrid", "Loss", {"run": "a"})
    assert not narrowed.matches("TrainGrid", "Loss", {"run": "b"})
    with pytest.raises(QueryError):
        parse("SELECT MAX(x) FROM TrainGrid WHERE run != 'a'")


def test_order_by_keeps_the_highest_series_within_the_limit() -> None:
    query = parse("SELECT MAX(StalledSeconds) FROM SCHEMA(TrainGrid, node, run) GROUP BY run "
                  "ORDER BY MAX() DESC LIMIT 2")
    series = bucket(query, [_observation(0, f"r{k}", "n", float(k)) for k in range(5)], 60)
    assert list(window(query, series, T0 + 60, 1, 60)) == [(("run", "r4"),), (("run", "r3"),)]


def test_missing_data_counts_as_the_alarm_says() -> None:
    nothing: list[float | None] = [None, None, None]
    half: list[float | None] = [None, 1000.0, 1000.0]
    for treat, empty, partly in (("notBreaching", "OK", "ALARM"),
                                 ("breaching", "ALARM", "ALARM"),
                                 ("ignore", "OK", "ALARM"),
                                 ("missing", "INSUFFICIENT_DATA", "ALARM")):
        rules = Rules(900, "GreaterThanThreshold", 3, 2, treat)
        assert (rules.state(nothing, "OK"), rules.state(half, "OK")) == (empty, partly), treat


def test_an_alarm_is_evaluated_as_the_clock_runs_and_its_contributors_described(
        start_emulator: StartEmulator) -> None:
    # A simulated hour of points lasts six real seconds: the alarm is still in ALARM when read.
    cloudwatch = start_emulator(speed=600).client("cloudwatch")
    cloudwatch.put_metric_alarm(
        AlarmName="stalled", ComparisonOperator="GreaterThanThreshold", Threshold=900,
        EvaluationPeriods=3, DatapointsToAlarm=2, TreatMissingData="notBreaching",
        Metrics=[{"Id": "q", "Expression": PER_RUN, "Period": 60, "ReturnData": True}])
    start = CLOCK.now()
    cloudwatch.put_metric_data(Namespace="TrainGrid", MetricData=[{
        "MetricName": "StalledSeconds", "Value": 1000.0 + m, "Timestamp": start + timedelta(
            minutes=m), "Dimensions": [{"Name": "run", "Value": "r"},
                                       {"Name": "node", "Value": "n"}]} for m in range(60)])
    wait_until(lambda: CLOCK.now() > start + timedelta(minutes=4), what="four minutes")
    (alarm,) = cloudwatch.describe_alarms(AlarmNames=["stalled"])["MetricAlarms"]
    assert alarm["StateValue"] == "ALARM"
    (contributor,) = cloudwatch.describe_alarm_contributors(AlarmName="stalled")[
        "AlarmContributors"]
    assert contributor["ContributorAttributes"] == {"run": "r"}
    items = cloudwatch.describe_alarm_history(
        AlarmName="stalled", HistoryItemType="AlarmContributorStateUpdate",
        StartDate=start, EndDate=CLOCK.now(), ScanBy="TimestampAscending")["AlarmHistoryItems"]
    assert [i["AlarmContributorId"] for i in items] == [contributor["ContributorId"]]
    assert items[0]["AlarmContributorAttributes"] == {"run": "r"}
    first = cloudwatch.describe_alarm_history(
        AlarmName="stalled", HistoryItemType="StateUpdate", ScanBy="TimestampAscending")[
        "AlarmHistoryItems"][0]
    # As PutMetricAlarm creates an alarm: INSUFFICIENT_DATA, until its first evaluation.
    assert json.loads(first["HistoryData"])["oldState"]["stateValue"] == "INSUFFICIENT_DATA"
    # An update keeps the alarm's state (PutMetricAlarm).
    cloudwatch.put_metric_alarm(
        AlarmName="stalled", ComparisonOperator="GreaterThanThreshold", Threshold=950,
        EvaluationPeriods=3, DatapointsToAlarm=2, TreatMissingData="notBreaching",
        Metrics=[{"Id": "q", "Expression": PER_RUN, "Period": 60, "ReturnData": True}])
    assert cloudwatch.describe_alarms(AlarmNames=["stalled"])["MetricAlarms"][0][
        "StateValue"] == "ALARM"
    with pytest.raises(cloudwatch.exceptions.ResourceNotFoundException):
        cloudwatch.describe_alarm_contributors(AlarmName="none")
