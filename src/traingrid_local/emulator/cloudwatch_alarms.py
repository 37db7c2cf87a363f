"""Adaptation (moto 5.2.5): CloudFormation creates ``AWS::CloudWatch::Alarm``.

moto's CloudWatch keeps alarms (PutMetricAlarm, with a Metrics array of MetricDataQuery as
well as a single metric), but its CloudFormation has no model of the type: it skips the
resource, and a ``Fn::GetAtt`` of the alarm (the dashboard's alarm widget) fails the stack.
Here the resource is created as PutMetricAlarm creates it, its ``Ref`` the alarm's name and
its ``Arn`` attribute the alarm's ARN, as CloudFormation gives them. ``emulator/metric_alarms.py``
evaluates them.
"""

from __future__ import annotations

from typing import Any

from moto.cloudformation import parsing
from moto.cloudwatch.models import MetricDataQuery, cloudwatch_backends

from traingrid_local.emulator.patching import PATCHES

ALARM_TYPE = "AWS::CloudWatch::Alarm"


class StackAlarm:
    """What the stack holds for the alarm: its name (``Ref``) and ARN (``GetAtt .Arn``)."""

    def __init__(self, name: str, arn: str) -> None:
        self.name, self.arn = name, arn

    @property
    def physical_resource_id(self) -> str:
        return self.name

    def is_created(self) -> bool:
        return True

    def get_cfn_attribute(self, attribute: str) -> str:
        if attribute == "Arn":
            return self.arn
        raise KeyError(f"{ALARM_TYPE} has no attribute {attribute}")

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @staticmethod
    def cloudformation_type() -> str:
        return ALARM_TYPE

    @classmethod
    def has_cfn_attr(cls, attribute: str) -> bool:
        return attribute == "Arn"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name: str, cloudformation_json: Any,
                                        account_id: str, region_name: str,
                                        **_: Any) -> StackAlarm:
        spec = cloudformation_json["Properties"]
        name = spec.get("AlarmName") or resource_name
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=name, namespace=spec.get("Namespace"), metric_name=spec.get("MetricName"),
            comparison_operator=spec["ComparisonOperator"],
            evaluation_periods=int(spec["EvaluationPeriods"]), period=spec.get("Period"),
            threshold=float(spec["Threshold"]), statistic=spec.get("Statistic"),
            description=spec.get("AlarmDescription"),
            dimensions=[{"Name": d["Name"], "Value": d["Value"]}
                        for d in spec.get("Dimensions", [])],
            alarm_actions=spec.get("AlarmActions", []),
            metric_data_queries=[_query(q) for q in spec.get("Metrics", [])] or None,
            datapoints_to_alarm=spec.get("DatapointsToAlarm"),
            ok_actions=spec.get("OKActions", []),
            insufficient_data_actions=spec.get("InsufficientDataActions", []),
            treat_missing_data=spec.get("TreatMissingData"))
        return cls(name, alarm.alarm_arn)

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name: str, cloudformation_json: Any,
                                        account_id: str, region_name: str) -> None:
        cloudwatch_backends[account_id][region_name].delete_alarms([resource_name])


def _query(query: dict[str, Any]) -> MetricDataQuery:
    """A query of the alarm's Metrics: an expression (a Metrics Insights query or metric
    math) is what the template's alarms use; a MetricStat is not adapted."""
    if "MetricStat" in query:
        raise NotImplementedError("an alarm's MetricStat query is not adapted; "
                                  "use an Expression")
    return MetricDataQuery(query_id=query["Id"], label=query.get("Label", ""),
                           period=str(query.get("Period", "")),
                           return_data=query.get("ReturnData", True),
                           expression=query.get("Expression"))


def _resource_class(previous: Any) -> Any:
    def resource_class_from_type(resource_type: str) -> Any:
        return StackAlarm if resource_type == ALARM_TYPE else previous(resource_type)

    return resource_class_from_type


def apply() -> None:
    PATCHES.wrap(parsing, "resource_class_from_type", _resource_class)
