"""The state machines and the code speak the same names: every error the ASL matches or reports
is one of ``traingrid.errors``, every status it compares or writes is a member of its enum,
and every function's Parameters are the keys of the TypedDict its step takes. A rename on
either side fails here.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import pytest
import sqlalchemy.exc

from tests.template.test_template import all_states, state_machines
from traingrid import errors
from traingrid.training.job_shape import Backend
from traingrid.vocabulary import campaign_fanout, training_run
from traingrid.vocabulary.campaign_fanout import RegionJobStatus
from traingrid.vocabulary.statuses import (
    BatchJobStatus,
    FileSystemLifecycle,
    RunStatus,
    TaskLifecycle,
)

# Errors Step Functions and the AWS services name (Service.Code): not TrainGrid's to define.
SERVICES = {"States", "Lambda", "Batch", "FSx", "SageMaker", "S3", "DynamoDB", "StepFunctions",
            "Sandbox"}
# The event each function's step takes, by the function's placeholder in the definition.
EVENTS: dict[str, type] = {
    "PlanRunFunctionArn": training_run.PlanRunEvent,
    "CheckFileSystemFunctionArn": training_run.CheckFileSystemEvent,
    "AwaitTrainingJobFunctionArn": training_run.AwaitTrainingJobEvent,
    "NextAttemptFunctionArn": training_run.NextAttemptEvent,
    "CheckArchiveFunctionArn": training_run.CheckArchiveEvent,
    "WriteManifestFunctionArn": training_run.WriteManifestEvent,
    "CheckExportFunctionArn": training_run.CheckExportEvent,
    "RetainFileSystemFunctionArn": training_run.RetainFileSystemEvent,
    "ExplainFailureFunctionArn": training_run.ExplainFailureEvent,
    "RecordRunFunctionArn": training_run.RecordRunEvent,
    "PlanFanoutFunctionArn": campaign_fanout.PlanFanoutEvent,
    "StageInputFunctionArn": campaign_fanout.StageInputEvent,
    "LaunchRegionJobFunctionArn": campaign_fanout.LaunchRegionJobEvent,
    "AwaitRegionJobFunctionArn": campaign_fanout.AwaitRegionJobEvent,
    "CheckRegionJobFunctionArn": campaign_fanout.RegionJobEvent,
    "StopRegionJobFunctionArn": campaign_fanout.RegionJobEvent,
    "NextRegionFunctionArn": campaign_fanout.RegionJobEvent,
    "RecordRegionJobFunctionArn": campaign_fanout.RecordRegionJobEvent,
    "FinishFanoutFunctionArn": campaign_fanout.FinishFanoutEvent,
}


def defined_errors() -> set[str]:
    """Every error name errors.py defines: its exception classes, and the database driver's
    names the record steps retry on."""
    classes = {name for name, value in vars(errors).items()
               if inspect.isclass(value) and issubclass(value, Exception)
               and value.__module__ == errors.__name__}
    return classes | set(errors.DATABASE_UNREACHABLE)


def states(template: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(state machine, state name, state) of every state, Map and Parallel branches too."""
    for machine, (_, definition) in state_machines(template).items():
        for name, state in all_states(definition).items():
            yield machine, name, state


def literals(node: Any, key: str) -> Iterator[str]:
    """The literal string values of ``key`` anywhere in ``node`` (not its ``key.$`` paths)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, str):
                yield v
            yield from literals(v, key)
    elif isinstance(node, list):
        for item in node:
            yield from literals(item, key)


def test_every_error_the_asl_matches_is_defined_in_errors(template):
    matched = [(machine, name, error) for machine, name, state in states(template)
               for rule in [*state.get("Retry", []), *state.get("Catch", [])]
               for error in rule["ErrorEquals"]]
    assert matched
    ours = [m for m in matched if "." not in m[2]]
    assert ours, "the record steps retry on TrainGrid's and the driver's own errors"
    unknown = [m for m in ours if m[2] not in defined_errors()]
    assert not unknown, f"errors the ASL matches that errors.py does not define: {unknown}"
    services = {m[2].split(".", 1)[0] for m in matched if "." in m[2]}
    assert services <= SERVICES, f"not an AWS service's error: {services - SERVICES}"


def test_every_error_the_asl_reports_is_defined_in_errors(template):
    """A Fail state's Error and the ``error`` a Pass state writes for the Fail state after it."""
    reported = []
    for machine, name, state in states(template):
        if state["Type"] == "Fail" and "Error" in state:
            reported.append((machine, name, state["Error"]))
        reported += [(machine, name, error)
                     for error in literals(state.get("Parameters", {}), "error")]
    assert {"RunFailed", "OutcomeNotRecorded"} <= {r[2] for r in reported}
    unknown = [r for r in reported if r[2] not in defined_errors()]
    assert not unknown, f"errors the ASL reports that errors.py does not define: {unknown}"


def test_the_database_errors_retried_are_the_drivers_own_names():
    assert set(errors.DATABASE_UNREACHABLE) == {
        sqlalchemy.exc.OperationalError.__name__, sqlalchemy.exc.InterfaceError.__name__}


def test_every_status_the_asl_writes_is_a_member_of_its_enum(template):
    """The statuses a state writes itself (a submitted job's, a run's outcome)."""
    written = []
    for machine, name, state in states(template):
        for field in ("Parameters", "ResultSelector"):
            enum: type[StrEnum] = (BatchJobStatus if field == "ResultSelector"
                                   and ":batch:submitJob" in state.get("Resource", "")
                                   else RunStatus)
            written += [(machine, name, value, enum)
                        for value in literals(state.get(field, {}), "status")]
    assert len(written) >= 4
    wrong = [w for w in written if w[2] not in {m.value for m in w[3]}]
    assert not wrong, f"statuses no enum holds: {wrong}"


# What each Choice compares with StringEquals, and the enum whose values it may be.
COMPARED_ENUMS: dict[str, type[StrEnum]] = {
    "$.job.status": RegionJobStatus,
    "$.outcome.status": RunStatus,
    "$.file_system.lifecycle": FileSystemLifecycle,
    "$.export.lifecycle": TaskLifecycle,
    "$.plan.job.backend": Backend,
}


def string_comparisons(rule: dict[str, Any]) -> list[tuple[str, str]]:
    """(Variable, StringEquals) of a Choice rule and of every rule nested in And/Or/Not."""
    found = [(rule["Variable"], rule["StringEquals"])] if "StringEquals" in rule else []
    for nested in [*rule.get("And", []), *rule.get("Or", []), *filter(None, [rule.get("Not")])]:
        found += string_comparisons(nested)
    return found


def test_every_string_a_choice_compares_is_a_value_of_its_enum(template):
    compared = [(machine, name, variable, value) for machine, name, state in states(template)
                for rule in state.get("Choices", [])
                for variable, value in string_comparisons(rule)]
    assert {c[2] for c in compared} == set(COMPARED_ENUMS), "map each compared path to its enum"
    wrong = [c for c in compared if c[3] not in {m.value for m in COMPARED_ENUMS[c[2]]}]
    assert not wrong, f"compared with a value no enum holds: {wrong}"


def function_tasks(template: dict[str, Any]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(machine, state, function placeholder, the event it sends) of every Task that invokes
    one of the stack's functions (directly, or with a task token)."""
    for machine, name, state in states(template):
        if state["Type"] != "Task":
            continue
        resource, parameters = state["Resource"], state.get("Parameters", {})
        if resource.endswith(":lambda:invoke.waitForTaskToken"):
            resource, parameters = parameters["FunctionName"], parameters["Payload"]
        if resource.startswith("${") and resource.endswith("FunctionArn}"):
            yield machine, name, resource[2:-1], parameters


def test_every_function_s_parameters_are_the_keys_of_its_event(template):
    tasks = list(function_tasks(template))
    assert {t[2] for t in tasks} == set(EVENTS), "map every function to the event it takes"
    for machine, name, function, parameters in tasks:
        hints = typing.get_type_hints(EVENTS[function], include_extras=True)
        required = {k for k, v in hints.items() if typing.get_origin(v) is not typing.NotRequired}
        sent = {key.removesuffix(".$") for key in parameters}
        assert required <= sent <= set(hints), (
            f"{machine}.{name} sends {sorted(sent)} to {function}: "
            f"{EVENTS[function].__name__} requires {sorted(required)} of {sorted(hints)}")


@pytest.mark.parametrize("error", ["TrainingJobStuck", "TrainingTimedOut", "TrainingJobFailed",
                                   "RegionFailed", "FileSystemNotDeleted", "UnknownFailure"])
def test_the_errors_steps_report_without_raising_are_defined_in_errors(error):
    assert error in defined_errors()
