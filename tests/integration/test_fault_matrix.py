"""The fault matrix: every Task state of both pipelines is in it and reachable, and a
representative part of it runs here (``make faults`` runs all of it): one cell per fault and
pipeline, at states whose failure takes different paths."""

from __future__ import annotations

import json

import pytest

from tests.integration.iam import missing_permissions
from traingrid_local.demo import fault_matrix
from traingrid_local.demo.fault_matrix import REACH, Cell
from traingrid_local.emulator import lambda_inprocess
from traingrid_local.emulator.fault_injection import STATE_FAULTS

pytestmark = pytest.mark.e2e

# Each fault kind once per pipeline; between them: the hydrate, train, archive and release
# steps, a step only a failure reaches, a Map branch and the database steps.
SAMPLE = [
    Cell("training", "CreateFileSystem", "throttling-storm"),
    Cell("training", "AwaitTrainingJob", "abort"),
    Cell("training", "CheckExport", "timeout"),
    Cell("training", "DeleteFileSystem", "service-error"),
    Cell("training", "StopTrainingJob", "throttling-storm"),
    Cell("training", "RecordSuccess", "service-error"),
    Cell("training", "NextAttempt", "abort"),
    Cell("campaign", "CheckRegionJob", "abort"),
    Cell("campaign", "RecordRegionJob", "service-error"),
    Cell("campaign", "LaunchRegionJob", "throttling-storm"),
    Cell("campaign", "FinishFanout", "timeout"),
]


def test_the_matrix_is_every_task_state_of_both_pipelines_times_every_fault():
    everything = fault_matrix.cells()
    for pipeline, (_, path, _) in fault_matrix.PIPELINES.items():
        definition = json.loads((fault_matrix.ROOT / path).read_text())
        tasks = {name for branch in _branches(definition)
                 for name, state in branch["States"].items() if state["Type"] == "Task"}
        assert {c.state for c in everything if c.pipeline == pipeline} == tasks
    assert len(everything) == len({(c.pipeline, c.state) for c in everything}) * len(
        STATE_FAULTS)


def _branches(definition):
    found = [definition]
    for state in definition["States"].values():
        if branch := state.get("ItemProcessor") or state.get("Iterator"):
            found += _branches(branch)
    return found


def test_faults_that_lead_to_a_state_name_real_states_and_faults():
    for (pipeline, state), (_, at_states) in REACH.items():
        states = fault_matrix.pipeline_states(pipeline)
        assert state in states and set(at_states) <= set(states)
        named, faults = Cell(pipeline, state, "timeout").faults()
        assert faults[state].kind == "timeout" and set(at_states) < set(faults)


def test_asking_for_what_is_not_there_says_what_is():
    with pytest.raises(ValueError) as raised:
        fault_matrix.cells(["training"], ["PlanFanout"], ["meteor"])
    message = str(raised.value)
    assert "unknown fault 'meteor'" in message and "no Task state 'PlanFanout'" in message
    assert "CreateFileSystem" in message


def test_a_part_of_the_matrix_ends_as_expected_with_nothing_leaked(tmp_path):
    unauthorised: list[str] = []
    janitor_calls: list[set[str]] = []  # per pipeline, in the order they ran

    def check_roles(emulator, deployment):
        # Every function, the janitor too, called only what its role allows.
        unauthorised.extend(missing_permissions(deployment.stack, dict(lambda_inprocess.CALLS)))
        janitor_calls.append(lambda_inprocess.CALLS[deployment.stack.resources["JanitorFunction"]])

    results = fault_matrix.run(SAMPLE, database_dir=tmp_path, after=check_roles)

    assert [r.cell for r in results] == SAMPLE
    assert unauthorised == []
    training, campaign = janitor_calls
    assert {"batch:TerminateJob", "fsx:DeleteFileSystem", "s3:GetObject"} <= training
    assert {"sagemaker:ListTags", "sagemaker:StopTrainingJob"} <= campaign
    problems = {f"{r.cell.state}/{r.cell.fault}": r.problems for r in results if not r.ok}
    assert problems == {}
    for result in results:
        assert result.status == result.cell.expected
        assert result.leaked == []
    by_cell = {(r.cell.state, r.cell.fault): r for r in results}
    # Released by the pipeline itself, or by the janitor when nothing else could.
    assert by_cell[("AwaitTrainingJob", "abort")].janitor_actions >= 2
    assert by_cell[("DeleteFileSystem", "service-error")].janitor_actions == 1
    unrecorded = by_cell[("RecordSuccess", "service-error")].database
    assert (unrecorded["status"], unrecorded["recorded_by"]) == ("SUCCEEDED", "janitor")
    assert by_cell[("AwaitTrainingJob", "abort")].database["status"] == "ABORTED"
    # Stopped while choosing another attempt: the lost job's file system is archived and
    # released by the janitor.
    assert by_cell[("NextAttempt", "abort")].janitor_actions >= 1
    assert "states:ListExecutions" in training
    aborted = by_cell[("CheckRegionJob", "abort")].database
    assert aborted["status"] == "FAILED" and "ABORTED" in aborted["failure_cause"]
    assert set(aborted["jobs"].values()) == {"Stopped"}
    storm = by_cell[("CreateFileSystem", "throttling-storm")]
    assert storm.error == "FSx.ThrottlingException" and "quota" in storm.cause
    rows = fault_matrix.table_rows(results)
    assert rows["training"][0] == ["CreateFileSystem", "-", "FAILED · 0 leaked", "-", "-"]
