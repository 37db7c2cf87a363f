"""The fault matrix: every Task state of both pipelines is in it and reachable, and all of it
runs here, in shards the workers share (``make faults`` runs it as one table)."""

from __future__ import annotations

import json

import pytest

from tests.integration.iam import missing_permissions
from traingrid_local.demo import fault_matrix
from traingrid_local.demo.fault_matrix import REACH, Cell
from traingrid_local.emulator import lambda_inprocess
from traingrid_local.emulator.fault_injection import STATE_FAULTS

pytestmark = pytest.mark.e2e

# The whole matrix runs here, split into shards of about this many cells (one deployment
# each), so the workers share it and a cell that crashes never lands.
SHARD_CELLS = 13


def _shards() -> dict[str, list[Cell]]:
    shards: dict[str, list[Cell]] = {}
    groups: dict[tuple[str, str], list[Cell]] = {}
    for cell in fault_matrix.cells():
        groups.setdefault((cell.pipeline, cell.backend), []).append(cell)
    for (pipeline, backend), cells in groups.items():
        count = -(-len(cells) // SHARD_CELLS)
        for index in range(count):
            shards[f"{pipeline}-{backend}-{index + 1}of{count}"] = cells[index::count]
    return shards


SHARDS = _shards()


def test_the_matrix_is_every_task_state_of_both_pipelines_times_every_fault():
    everything = fault_matrix.cells()
    for pipeline, (_, path, _) in fault_matrix.PIPELINES.items():
        tasks = set()
        for each in (path, *fault_matrix.NESTED.get(pipeline, ())):
            definition = json.loads((fault_matrix.ROOT / each).read_text())
            tasks |= {name for branch in _branches(definition)
                      for name, state in branch["States"].items() if state["Type"] == "Task"}
        # Less the states only a dataset of many listing pages reaches (test_plan_scale's).
        assert ({c.state for c in everything if c.pipeline == pipeline}
                == tasks - fault_matrix.LARGE_DATASETS_ONLY)
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


def test_the_shards_hold_every_cell_once():
    held = [cell for cells in SHARDS.values() for cell in cells]
    assert sorted(held, key=repr) == sorted(fault_matrix.cells(), key=repr)
    assert max(len(cells) for cells in SHARDS.values()) <= SHARD_CELLS


def _released_and_recorded(by_cell: dict[tuple[str, str], fault_matrix.CellResult]) -> None:
    """What particular cells must show beyond ending as expected with nothing leaked."""
    def cell(state: str, fault: str) -> fault_matrix.CellResult | None:
        return by_cell.get((state, fault))

    # Released by the pipeline itself, or by the janitor when nothing else could.
    if (found := cell("AwaitTrainingJob", "abort")) is not None:
        assert found.janitor_actions >= 2 and found.database["status"] == "ABORTED"
    if (found := cell("DeleteFileSystem", "service-error")) is not None:
        assert found.janitor_actions == 1
    if (found := cell("RecordSuccess", "service-error")) is not None:
        assert (found.database["status"], found.database["recorded_by"]) == (
            "SUCCEEDED", "janitor")
    # Stopped while choosing another attempt: the lost job's file system is archived and
    # released by the janitor.
    if (found := cell("NextAttempt", "abort")) is not None:
        assert found.janitor_actions >= 1
    # A branch stopped while its job trains: the region is recorded failed, and the job is
    # stopped by the janitor once the fan-out has ended.
    if (found := cell("AwaitRegionJob", "abort")) is not None:
        assert found.database["status"] == "FAILED"
        assert "ABORTED" in found.database["failure_cause"]
    if (found := cell("CreateFileSystem", "throttling-storm")) is not None:
        assert found.error == "FSx.ThrottlingException" and "quota" in found.cause
        assert fault_matrix.table_rows([found])["training"][0] == [
            "CreateFileSystem", "-", "FAILED · 0 leaked", "-", "-"]


@pytest.mark.parametrize("shard", sorted(SHARDS))
def test_every_cell_of_the_matrix_ends_as_expected_with_nothing_leaked(shard, tmp_path):
    cells = SHARDS[shard]
    unauthorised: list[str] = []
    janitor_calls: set[str] = set()

    def check_roles(emulator, deployment):
        # Every function, the janitor too, called only what its role allows.
        unauthorised.extend(missing_permissions(deployment.stack, dict(lambda_inprocess.CALLS)))
        janitor_calls.update(
            lambda_inprocess.CALLS[deployment.stack.resources["JanitorFunction"]])

    results = fault_matrix.run(cells, database_dir=tmp_path, after=check_roles)

    assert [r.cell for r in results] == cells
    problems = {f"{r.cell.state}/{r.cell.fault}": r.problems for r in results if not r.ok}
    assert problems == {}
    assert unauthorised == []
    for result in results:
        assert result.status == result.cell.expected
        assert result.leaked == []
    by_cell = {(r.cell.state, r.cell.fault): r for r in results}
    _released_and_recorded(by_cell)
    if ("AwaitTrainingJob", "abort") in by_cell:
        assert {"batch:TerminateJob", "fsx:DeleteFileSystem", "s3:GetObject"} <= janitor_calls
    if ("NextAttempt", "abort") in by_cell:
        assert "states:ListExecutions" in janitor_calls
    if ("AwaitRegionJob", "abort") in by_cell:
        assert {"sagemaker:ListTags", "sagemaker:StopTrainingJob"} <= janitor_calls
