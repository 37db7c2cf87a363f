"""CloudFormation creates the template's CloudWatch alarm (moto has no model of the type) and
dashboard: the alarm as PutMetricAlarm keeps it (a Metrics Insights query), its ARN in the
dashboard's alarm widget."""

from __future__ import annotations

import json

from traingrid_local.emulator.session import Emulator
from traingrid_local.stack.environment import deploy_traingrid


def test_the_stack_has_its_stalled_run_alarm_and_dashboard() -> None:
    with Emulator() as emulator:
        deployment = deploy_traingrid(emulator, regions=())
        try:
            cloudwatch = emulator.client("cloudwatch")
            (alarm,) = cloudwatch.describe_alarms(AlarmNamePrefix="traingrid-stalled")[
                "MetricAlarms"]
            (query,) = alarm["Metrics"]
            assert query["Expression"].startswith("SELECT MAX(StalledSeconds)")
            assert alarm["TreatMissingData"] == "notBreaching" and alarm["Threshold"] == 900
            body = json.loads(cloudwatch.get_dashboard(
                DashboardName="traingrid-TrainGrid")["DashboardBody"])
            (widget,) = [w for w in body["widgets"] if w["type"] == "alarm"]
            assert widget["properties"]["alarms"] == [alarm["AlarmArn"]]
            machine = deployment.stack.outputs["TrainingRunStateMachineArn"]
            assert machine in json.dumps(body)
        finally:
            deployment.close()
