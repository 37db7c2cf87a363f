"""TrainingRun outcomes: one row per execution, rewritten by a retried record step, never
replaced by the janitor, read back exactly on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy.exc import IntegrityError

from traingrid.db.engine import transaction
from traingrid.db.repositories import TrainingRunRepository

T0 = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
MACHINE = "arn:aws:states:us-east-1:123456789012:execution:traingrid-TrainingRun"


def outcome(name: str, status: str = "SUCCEEDED", started_at: datetime = T0,
            **fields) -> dict:
    return {
        "execution_arn": f"{MACHINE}:{name}", "name": name, "status": status,
        "started_at": started_at, "ended_at": started_at + timedelta(hours=2),
        "dataset": "s3://data/imagenet/", "nodes": 4, "instance_type": "p3.16xlarge",
        "mpi_gpus": 32, "estimated_max_usd": Decimal("35268.58"), "job_id": "job-1",
        "job_status": "SUCCEEDED", "training_s": 7200, "file_system_id": "fs-1",
        "artifacts": f"s3://data/runs/{name}/", "manifest": f"s3://data/runs/{name}/manifest.json",
        "archived_objects": 13, "archived_bytes": 5 * 2**40, "retained_file_system": None,
        "error": None, "failure_cause": None, "recorded_by": "run", **fields,
    }


def test_a_run_is_recorded_once_and_a_retried_record_rewrites_it(migrated_url):
    with transaction(migrated_url) as session:
        first = TrainingRunRepository(session).record(outcome("resnet-1", "FAILED",
                                                              error="Lost"))
        first_id = first.id
    with transaction(migrated_url) as session:
        again = TrainingRunRepository(session).record(outcome("resnet-1"))
        assert again.id == first_id and (again.status, again.error) == ("SUCCEEDED", None)
    with transaction(migrated_url) as session:
        row = TrainingRunRepository(session).get(f"{MACHINE}:resnet-1")
        assert row.started_at == T0 and row.estimated_max_usd == Decimal("35268.58")
        assert row.archived_bytes == 5 * 2**40 and row.recorded_at.tzinfo is not None


def test_the_janitor_never_replaces_a_runs_own_record(migrated_url):
    with transaction(migrated_url) as session:
        runs = TrainingRunRepository(session)
        runs.record(outcome("resnet-1"))
        row, written = runs.record_if_absent(outcome("resnet-1", "ABORTED",
                                                     recorded_by="janitor"))
        assert not written and (row.status, row.recorded_by) == ("SUCCEEDED", "run")
        row, written = runs.record_if_absent(outcome("resnet-2", "ABORTED",
                                                     recorded_by="janitor"))
        assert written and (row.status, row.recorded_by) == ("ABORTED", "janitor")


def test_missing_names_the_executions_without_a_record_in_order(migrated_url):
    with transaction(migrated_url) as session:
        runs = TrainingRunRepository(session)
        runs.record(outcome("b"))
        arns = [f"{MACHINE}:{name}" for name in ("c", "b", "a")]
        assert runs.missing(arns) == [arns[0], arns[2]]
        assert runs.missing([]) == []


def test_a_status_step_functions_does_not_have_is_refused(migrated_url):
    with pytest.raises(IntegrityError), transaction(migrated_url) as session:
        TrainingRunRepository(session).record(outcome("resnet-1", "RUNNING"))


def test_a_runs_cost_receipt_is_kept_exactly_and_summed_over_a_period(migrated_url):
    from traingrid.training.run_record import state_cost

    state = {"plan": {"job": {"instance_type": "p3.16xlarge", "attempts": [
        {"attempt": 1, "nodes": 4, "reason": "first attempt", "job_id": "job-1",
         "outcome": "node lost", "ran_s": 1800},
        {"attempt": 2, "nodes": 4, "reason": "node lost"}]},
        "file_system": {"storage_capacity_gib": 1200,
                        "lustre_configuration": {"DeploymentType": "SCRATCH_2"}}},
        "file_system": {"id": "fs-1", "hydrate_s": 600},
        "job": {"id": "job-2", "status": "SUCCEEDED", "running_s": 3600}}
    cost = state_cost(state)
    with transaction(migrated_url) as session:
        runs = TrainingRunRepository(session)
        runs.record(outcome("resnet-1", cost=cost, cost_usd=cost["actual"]["total"]))
        runs.record(outcome("resnet-2", started_at=T0 + timedelta(days=2)))
    with transaction(migrated_url) as session:
        runs = TrainingRunRepository(session)
        row = runs.get(f"{MACHINE}:resnet-1")
        assert row.cost == cost  # the JSON comes back as written
        # 4 nodes × (0.5 h + 1 h) at $24.48, and the file system's share: exact to 1e-6.
        assert row.cost_usd == Decimal(str(cost["actual"]["total"]))
        assert row.cost["actual"]["compute"] == 146.88
        listed = runs.costs(since=T0, until=T0 + timedelta(days=1))
        assert [r["name"] for r in listed] == ["resnet-1"]
        assert listed[0]["actual"] == cost["actual"]
        assert [r["cost_usd"] for r in runs.costs(since=T0 + timedelta(days=1))] == [None]
