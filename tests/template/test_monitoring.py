"""The stack's CloudWatch dashboard and stalled-run alarm: the dashboard body is valid JSON of
PutDashboard's structure, and every widget reads a metric that something of TrainGrid publishes
(Step Functions' AWS/States per one of this template's state machines, the functions'
Powertools metrics, the nodes' embedded metric format) and names resources of this template."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from traingrid_local.templates import load_template
from traingrid_node import emf

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "layers" / "traingrid" / "python" / "traingrid"
STATES_METRICS = {"ExecutionsStarted", "ExecutionsSucceeded", "ExecutionsFailed",
                  "ExecutionsTimedOut", "ExecutionsAborted", "ExecutionTime",
                  "ExecutionThrottled", "ExecutionsRedriven"}
PSEUDO = {"AWS::Region", "AWS::StackName", "AWS::AccountId", "AWS::Partition"}
QUERY = re.compile(r"SELECT (AVG|SUM|MAX|MIN|COUNT)\((\w+)\) FROM SCHEMA\(TrainGrid, "
                   r"([\w, ]+)\)(?: GROUP BY ([\w, ]+?))?(?: ORDER BY (\w+)\(\) (ASC|DESC))?$")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def powertools_metrics() -> set[str]:
    """The metric names the runtime package adds with Powertools (literal names)."""
    found = set()
    for path in RUNTIME.rglob("*.py"):
        found |= set(re.findall(r'add_metric\(\s*name="(\w+)"', path.read_text()))
    return found


def substituted(template: dict[str, Any], text: str) -> str:
    """The Fn::Sub string with each ${Name} as ``ref:Name`` (asserting it names something)."""
    def name(match: re.Match[str]) -> str:
        ref = match.group(1)
        logical = ref.split(".")[0]
        assert ref in PSEUDO or logical in template["Resources"] or \
            logical in template["Parameters"], f"${{{ref}}} names nothing in the template"
        return f"ref:{ref}"

    return re.sub(r"\$\{([\w:.]+)\}", name, text)


def schema_query(expression: str) -> tuple[str, set[str], set[str]]:
    """(metric, the SCHEMA's dimensions, GROUP BY's) of a Metrics Insights query on the
    nodes' metrics, which must be one the nodes write, per a dimension set they write."""
    found = QUERY.match(expression)
    assert found, f"not a query of the TrainGrid schema: {expression}"
    metric, dimensions = found.group(2), {d.strip() for d in found.group(3).split(",")}
    grouped = {d.strip() for d in (found.group(4) or "").split(",") if d.strip()}
    assert metric in emf.UNITS, f"the nodes write no {metric}"
    assert dimensions in [set(s) for s in emf.DIMENSIONS], dimensions
    assert grouped <= dimensions
    return metric, dimensions, grouped


def test_the_dashboard_body_is_putdashboards_json(template) -> None:
    dashboard = template["Resources"]["MonitoringDashboard"]
    assert dashboard["Type"] == "AWS::CloudWatch::Dashboard"
    body = json.loads(substituted(template, dashboard["Properties"]["DashboardBody"]["Fn::Sub"]))
    widgets = body["widgets"]
    assert set(body) == {"widgets"} and widgets[0]["type"] == "text"  # says where it is from
    cells: set[tuple[int, int]] = set()
    for widget in widgets:
        assert widget["type"] in ("metric", "text", "alarm")
        x, y, width, height = (widget[k] for k in ("x", "y", "width", "height"))
        assert 1 <= width <= 24 and x + width <= 24 and 1 <= height <= 1000
        mine = {(cx, cy) for cx in range(x, x + width) for cy in range(y, y + height)}
        assert not mine & cells, f"{widget['properties'].get('title')} overlaps another widget"
        cells |= mine


def test_every_widget_reads_a_published_metric_of_this_stacks_resources(template) -> None:
    body = json.loads(substituted(
        template, template["Resources"]["MonitoringDashboard"]["Properties"]["DashboardBody"][
            "Fn::Sub"]))
    resources, environment = template["Resources"], template["Globals"]["Function"][
        "Environment"]["Variables"]
    published, read = powertools_metrics(), set()
    for widget in (w for w in body["widgets"] if w["type"] != "text"):
        properties = widget["properties"]
        if widget["type"] == "alarm":
            for alarm in properties["alarms"]:
                logical = alarm.removeprefix("ref:").removesuffix(".Arn")
                assert resources[logical]["Type"] == "AWS::CloudWatch::Alarm"
            continue
        assert properties["region"] == "ref:AWS::Region" and properties["title"]
        for metric in properties["metrics"]:
            if isinstance(metric[0], dict):
                read.add(schema_query(metric[0]["expression"])[0])
                continue
            namespace, name, *rest = [m for m in metric if not isinstance(m, dict)]
            dimensions = dict(zip(rest[::2], rest[1::2], strict=True))
            if namespace == "AWS/States":
                assert name in STATES_METRICS
                logical = dimensions["StateMachineArn"].removeprefix("ref:")
                assert resources[logical]["Type"] == "AWS::Serverless::StateMachine"
            else:
                assert namespace == environment["POWERTOOLS_METRICS_NAMESPACE"]
                assert dimensions == {"service": environment["POWERTOOLS_SERVICE_NAME"]}
                assert name in published, f"no function publishes {name}"
            read.add(name)
    # Both pipelines, and what the page promises: throughput, queue wait, file systems, cost.
    assert {"ImagesPerSecond", "QueueWaitSeconds", "FileSystemsAlive", "RunCostUSD",
            "ExecutionsFailed", "StepsCompleted", "StalledSeconds"} <= read
    machines = {m.split("ref:")[1].split('"')[0] for m in re.findall(
        r'"StateMachineArn", "ref:\w+"', json.dumps(body))}
    assert machines == {"TrainingRunStateMachine", "CampaignFanoutStateMachine"}


def test_the_stalled_run_alarm_watches_every_run_and_is_quiet_when_none_trains(template):
    alarm = template["Resources"]["StalledRunAlarm"]["Properties"]
    (query,) = alarm["Metrics"]
    assert query["ReturnData"] is True and query["Period"] == 60
    metric, dimensions, grouped = schema_query(query["Expression"])
    assert (metric, dimensions) == ("StalledSeconds", {"run", "node"})
    assert not {"MetricName", "Namespace", "Statistic", "Dimensions"} & set(alarm)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == {"Ref": "StalledRunAlarmSeconds"}


def test_a_forged_line_can_raise_a_runs_figure_but_not_hold_its_notification(template):
    """Every job may print StalledSeconds for any run (embedded metric format asks no
    permission): the alarm takes the largest observation, which an added point cannot lower,
    and makes each run a contributor of its own, whose change of state another run held in
    ALARM cannot swallow."""
    (query,) = template["Resources"]["StalledRunAlarm"]["Properties"]["Metrics"]
    found = QUERY.match(query["Expression"])
    assert found is not None
    function, grouped = found.group(1), {d.strip() for d in (found.group(4) or "").split(",")}
    assert function == "MAX" and grouped == {"run"}
    # Past the 500 series a query returns, the highest stay.
    assert (found.group(5), found.group(6)) == ("MAX", "DESC")
