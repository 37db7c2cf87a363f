"""Repositories of the campaign database.

Each takes a ``Session`` and never commits: the caller owns the transaction
(``traingrid.db.engine.transaction``). Writes that events can repeat (a marker delivered twice,
a retried step) are idempotent and safe when two of them race: they insert with
``ON CONFLICT DO NOTHING`` and then read the row that won.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Insert, func, or_, select
from sqlalchemy.orm import Session, selectinload

from traingrid import clock
from traingrid.db.models import (
    Campaign,
    CampaignRun,
    Dataset,
    Region,
    RegionJob,
    RegionPrice,
    RunStatus,
    TrainingRunRecord,
)
from traingrid.errors import RecordNotFound
from traingrid.vocabulary.campaign_fanout import FINAL_JOB_STATUSES, RegionJobPlan, RegionJobStatus

# What record_job may change; "attempts" replaces the list, "attempt" (separate) appends to it.
JOB_FIELDS = frozenset({
    "status", "region", "job_name", "job_arn", "s3_input", "started_at", "ended_at",
    "artifacts", "failure_cause", "attempts", "staged_bytes",
})
FINAL_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED)


def _insert(session: Session, model: type[Any]) -> Any:
    """The dialect's ``insert`` (imported here: a process only ever needs its own), which
    knows ``ON CONFLICT``."""
    dialect = session.get_bind().dialect.name
    if dialect not in ("postgresql", "sqlite"):
        raise NotImplementedError(f"the campaign database runs on PostgreSQL or SQLite, "
                                  f"not {dialect}")
    return importlib.import_module(f"sqlalchemy.dialects.{dialect}").insert(model)


def _insert_ignoring_conflicts(
    session: Session, model: type[Any], values: dict[str, Any] | list[dict[str, Any]],
    conflict_columns: Iterable[str],
) -> Insert:
    """``INSERT … ON CONFLICT (columns) DO NOTHING``."""
    statement = _insert(session, model).values(values)
    return statement.on_conflict_do_nothing(index_elements=list(conflict_columns))


def _iso(moment: datetime | None) -> str | None:
    return clock.iso(moment) if moment else None


class CampaignRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, campaign_id: str) -> Campaign | None:
        return self.session.get(Campaign, campaign_id)

    def ensure(self, campaign_id: str, **defaults: Any) -> Campaign:
        """The campaign, created with ``defaults`` if it does not exist yet (never updated)."""
        campaign = self.get(campaign_id)
        if campaign is None:
            values = {"id": campaign_id, **defaults}
            self.session.execute(_insert_ignoring_conflicts(self.session, Campaign, values, ["id"]))
            campaign = self.session.get_one(Campaign, campaign_id)
        return campaign

    def overview(self) -> list[dict[str, Any]]:
        """Every campaign with its datasets and its last run, JSON-ready, in three queries."""
        campaigns = self.session.scalars(select(Campaign).order_by(Campaign.id)).all()
        datasets = self.session.scalars(
            select(Dataset).order_by(Dataset.campaign_id, Dataset.region_code,
                                     Dataset.registered_at, Dataset.id)
        ).all()
        latest_first = (CampaignRun.started_at.desc(), CampaignRun.id.desc())
        ranked = select(
            CampaignRun,
            func.row_number().over(partition_by=CampaignRun.campaign_id, order_by=latest_first)
            .label("recency"),
        ).subquery()
        last = {run.campaign_id: run for run in self.session.execute(
            select(ranked).where(ranked.c.recency == 1)
        )}
        by_campaign: dict[str, list[dict[str, Any]]] = {c.id: [] for c in campaigns}
        for d in datasets:
            by_campaign[d.campaign_id].append({
                "region": d.region_code, "s3_uri": d.s3_uri, "objects": d.objects,
                "bytes": d.bytes, "registered_at": _iso(d.registered_at),
            })
        return [_campaign_overview(c, by_campaign[c.id], last.get(c.id)) for c in campaigns]


def _campaign_overview(campaign: Campaign, datasets: list[dict[str, Any]],
                       run: Any | None) -> dict[str, Any]:
    last_run = None if run is None else {
        "name": run.name, "status": run.status, "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
    }
    return {
        "id": campaign.id, "description": campaign.description,
        "instance_type": campaign.instance_type, "instance_count": campaign.instance_count,
        "placement": campaign.placement, "datasets": datasets, "last_run": last_run,
    }


class RegionRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, code: str) -> Region | None:
        return self.session.get(Region, code)

    def require(self, code: str) -> Region:
        region = self.get(code)
        if region is None:
            raise RecordNotFound(f"no region {code!r} in the campaign database")
        return region

    def codes(self) -> list[str]:
        """Every region jobs may have trained in, enabled or not."""
        return list(self.session.scalars(select(Region.code).order_by(Region.code)))

    def upsert(
        self, code: str, *, enabled: bool, transfer_usd_per_gb: Decimal | float | str,
        artifact_bucket: str, prices: dict[str, dict[str, Any]],
    ) -> Region:
        """The region as it is now: ``prices`` (by instance type: ``on_demand_usd_per_hour``,
        ``spot_usd_per_hour`` (optional), ``capacity_instances``) replaces its price list, so an
        instance type that is no longer listed can no longer be planned there."""
        region = self.get(code)
        if region is None:
            region = Region(code=code)
            self.session.add(region)
        region.enabled = enabled
        region.transfer_usd_per_gb = _decimal(transfer_usd_per_gb)
        region.artifact_bucket = artifact_bucket
        existing = {p.instance_type: p for p in region.prices}
        region.prices = [
            _price(existing.get(instance_type) or RegionPrice(instance_type=instance_type), price)
            for instance_type, price in sorted(prices.items())
        ]
        self.session.flush()
        return region


def _decimal(value: Decimal | float | str) -> Decimal:
    # Through str, so 28.152 is stored as 28.152 and not as its binary approximation.
    return Decimal(str(value))


def _price(row: RegionPrice, price: dict[str, Any]) -> RegionPrice:
    row.on_demand_usd_per_hour = _decimal(price["on_demand_usd_per_hour"])
    spot = price.get("spot_usd_per_hour")
    row.spot_usd_per_hour = None if spot is None else _decimal(spot)
    row.capacity_instances = int(price["capacity_instances"])
    return row


class DatasetRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def register(
        self, campaign_id: str, region_code: str, s3_uri: str, objects: int, bytes: int,
        marker_etag: str | None = None, registered_at: datetime | None = None,
    ) -> tuple[Dataset, bool]:
        """Register a dataset once: ``(dataset, True)`` the first time, ``(the same dataset,
        False)`` for a repeated marker or event, even when two arrive at the same moment."""
        values = {
            "campaign_id": campaign_id, "region_code": region_code, "s3_uri": s3_uri,
            "objects": objects, "bytes": bytes, "marker_etag": marker_etag,
            "registered_at": registered_at or clock.now(),
        }
        statement = _insert_ignoring_conflicts(
            self.session, Dataset, values, ["campaign_id", "region_code", "s3_uri"]
        ).returning(Dataset.id)
        inserted = self.session.execute(statement).scalar_one_or_none()
        dataset = self.session.scalars(select(Dataset).where(
            Dataset.campaign_id == campaign_id, Dataset.region_code == region_code,
            Dataset.s3_uri == s3_uri,
        )).one()
        return dataset, inserted is not None

    def new_since_last_success(self, campaign_id: str) -> list[Dataset]:
        """Datasets registered after the campaign's last successful run started (all of them
        if it never succeeded): what scheduled retraining trains on."""
        last_success = (
            select(func.max(CampaignRun.started_at))
            .where(CampaignRun.campaign_id == campaign_id,
                   CampaignRun.status == RunStatus.SUCCEEDED)
            .scalar_subquery()
        )
        return list(self.session.scalars(
            select(Dataset)
            .where(Dataset.campaign_id == campaign_id,
                   or_(last_success.is_(None), Dataset.registered_at > last_success))
            .order_by(Dataset.region_code, Dataset.registered_at, Dataset.id)
        ))

    def campaigns_with_new_data(self) -> dict[str, int]:
        """Campaign → how many of its datasets were registered after its last successful run
        started (all of them if it never succeeded), for every campaign that has any; one
        query, with the same rule as ``new_since_last_success``."""
        last_success = (
            select(CampaignRun.campaign_id, func.max(CampaignRun.started_at).label("at"))
            .where(CampaignRun.status == RunStatus.SUCCEEDED)
            .group_by(CampaignRun.campaign_id)
            .subquery()
        )
        rows = self.session.execute(
            select(Dataset.campaign_id, func.count(Dataset.id))
            .outerjoin(last_success, last_success.c.campaign_id == Dataset.campaign_id)
            .where(or_(last_success.c.at.is_(None), Dataset.registered_at > last_success.c.at))
            .group_by(Dataset.campaign_id)
            .order_by(Dataset.campaign_id)
        )
        return {campaign_id: int(count) for campaign_id, count in rows}


class RunRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, execution_arn: str) -> CampaignRun | None:
        """The run of an execution, with its jobs."""
        return self.session.scalars(
            select(CampaignRun).options(selectinload(CampaignRun.jobs))
            .where(CampaignRun.execution_arn == execution_arn)
        ).one_or_none()

    def _get(self, execution_arn: str) -> CampaignRun:
        run = self.get(execution_arn)
        if run is None:
            raise RecordNotFound(f"no campaign run for execution {execution_arn}")
        return run

    def start(self, campaign_id: str, name: str, execution_arn: str, placement: str,
              started_at: datetime) -> CampaignRun:
        """The execution's run, RUNNING; a retried start returns the run it started first."""
        values = {
            "campaign_id": campaign_id, "name": name, "execution_arn": execution_arn,
            "placement": str(placement), "status": RunStatus.RUNNING.value,
            "started_at": started_at,
        }
        self.session.execute(
            _insert_ignoring_conflicts(self.session, CampaignRun, values, ["execution_arn"])
        )
        return self._get(execution_arn)

    def add_planned_jobs(self, run: CampaignRun, jobs: Sequence[RegionJobPlan]) -> list[RegionJob]:
        """One PLANNED job per planned region; jobs the run already has are kept as they are."""
        if jobs:
            rows = [{
                "run_id": run.id, "requested_region": plan.requested_region,
                "region": plan.region, "status": RegionJobStatus.PLANNED.value,
                "s3_input": plan.s3_uri,
                "placement_reason": plan.reason, "attempts": [],
            } for plan in jobs]
            self.session.execute(_insert_ignoring_conflicts(
                self.session, RegionJob, rows, ["run_id", "requested_region"]
            ))
            self.session.expire(run, ["jobs"])
        return list(run.jobs)

    def record_job(self, execution_arn: str, requested_region: str, *,
                   attempt: dict[str, Any] | None = None, **fields: Any) -> RegionJob:
        """Update one job of a run with ``fields`` (any of ``JOB_FIELDS``); ``attempt``
        ({region, status, reason}) is appended to its attempts."""
        unknown = fields.keys() - JOB_FIELDS
        if unknown:
            raise TypeError(f"record_job() cannot set {sorted(unknown)}; "
                            f"fields are {sorted(JOB_FIELDS)}")
        job = self.session.scalars(
            select(RegionJob).join(CampaignRun)
            .where(CampaignRun.execution_arn == execution_arn,
                   RegionJob.requested_region == requested_region)
            # Concurrent branches append to the same attempts list only one at a time.
            .with_for_update(of=RegionJob)
        ).one_or_none()
        if job is None:
            raise RecordNotFound(f"no {requested_region} job in the run of {execution_arn}")
        for name, value in fields.items():
            setattr(job, name, value)
        if attempt is not None:
            # A new list: JSON columns do not track changes made inside the old one.
            job.attempts = [*job.attempts, attempt]
        self.session.flush()
        self._completed_late(job.run)
        return job

    def _completed_late(self, run: CampaignRun) -> None:
        """A run closed FAILED before its last region's outcome arrived (a step still in
        flight when the execution stopped or broke off) that now has every region completed
        did what it was for: SUCCEEDED, whatever order the records came in."""
        if run.status == RunStatus.FAILED and run.jobs and all(
                job.status == RegionJobStatus.COMPLETED for job in run.jobs):
            run.status, run.failure_cause = RunStatus.SUCCEEDED.value, None
            self.session.flush()

    def finish(self, execution_arn: str, status: str, ended_at: datetime,
               failure_cause: str | None = None) -> CampaignRun:
        if status not in FINAL_RUN_STATUSES:
            raise ValueError(f"a run finishes {' or '.join(FINAL_RUN_STATUSES)}, not {status!r}")
        run = self._get(execution_arn)
        run.status, run.ended_at, run.failure_cause = str(status), ended_at, failure_cause
        self.session.flush()
        return run

    def record_cost(self, execution_arn: str, cost: dict[str, Any]) -> CampaignRun:
        """The run's receipt (``costs.receipt``) and its actual total; a retry writes it again."""
        run = self._get(execution_arn)
        run.cost, run.cost_usd = cost, _decimal(str(cost["actual"]["total"]))
        self.session.flush()
        return run

    def costs(self, since: datetime | None = None, until: datetime | None = None
              ) -> list[dict[str, Any]]:
        """Every run started in [since, until) with its recorded cost, oldest first."""
        query = select(CampaignRun).order_by(CampaignRun.started_at, CampaignRun.id)
        if since is not None:
            query = query.where(CampaignRun.started_at >= since)
        if until is not None:
            query = query.where(CampaignRun.started_at < until)
        return [{"name": row.name, "pipeline": "CampaignFanout", "campaign": row.campaign_id,
                 "status": row.status, "started_at": _iso(row.started_at), "dataset": None,
                 "instance_type": None, "cost_usd": row.cost_usd,
                 "actual": (row.cost or {}).get("actual"), "estimated_max_usd": None}
                for row in self.session.scalars(query)]

    def running(self) -> list[CampaignRun]:
        """Every run still RUNNING in the database, oldest first."""
        return list(self.session.scalars(
            select(CampaignRun).where(CampaignRun.status == RunStatus.RUNNING)
            .order_by(CampaignRun.started_at, CampaignRun.id)))

    def close(self, execution_arn: str, ended_at: datetime, cause: str,
              job_cause: str) -> CampaignRun:
        """End a run whose execution ended without recording its outcome. If every region's
        job completed, the run did what it was for: SUCCEEDED. Otherwise FAILED with
        ``cause``, and each job without an outcome Stopped with ``job_cause``."""
        run = self._get(execution_arn)
        if run.jobs and all(job.status == RegionJobStatus.COMPLETED for job in run.jobs):
            return self.finish(execution_arn, RunStatus.SUCCEEDED, ended_at)
        for job in run.jobs:
            if job.status not in FINAL_JOB_STATUSES:
                job.status = RegionJobStatus.STOPPED.value
                job.ended_at, job.failure_cause = ended_at, job_cause
        return self.finish(execution_arn, RunStatus.FAILED, ended_at, cause)


class TrainingRunRepository:
    """The outcomes of TrainingRun executions, one row per execution."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, execution_arn: str) -> TrainingRunRecord | None:
        return self.session.scalars(
            select(TrainingRunRecord).where(TrainingRunRecord.execution_arn == execution_arn)
        ).one_or_none()

    def record(self, outcome: dict[str, Any]) -> TrainingRunRecord:
        """The run's own record of its outcome; a retried step writes the same row again."""
        values = {**outcome, "recorded_at": clock.now()}
        statement = _insert(self.session, TrainingRunRecord).values(values)
        self.session.execute(statement.on_conflict_do_update(
            index_elements=["execution_arn"],
            set_={k: v for k, v in values.items() if k != "execution_arn"}))
        return self._read(outcome["execution_arn"])

    def record_if_absent(self, outcome: dict[str, Any]) -> tuple[TrainingRunRecord, bool]:
        """A record for a run that ended without writing its own; never replaces one. Returns
        the row and whether this call wrote it."""
        values = {**outcome, "recorded_at": clock.now()}
        written = self.session.execute(_insert_ignoring_conflicts(
            self.session, TrainingRunRecord, values, ["execution_arn"])
            .returning(TrainingRunRecord.id)).first()
        return self._read(outcome["execution_arn"]), written is not None

    def _read(self, execution_arn: str) -> TrainingRunRecord:
        self.session.expire_all()
        row = self.get(execution_arn)
        if row is None:  # the statement above wrote or found it in this transaction
            raise RecordNotFound(f"no training run for execution {execution_arn}")
        return row

    def costs(self, since: datetime | None = None, until: datetime | None = None
              ) -> list[dict[str, Any]]:
        """Every run started in [since, until) with its recorded cost, oldest first."""
        query = select(TrainingRunRecord).order_by(TrainingRunRecord.started_at)
        if since is not None:
            query = query.where(TrainingRunRecord.started_at >= since)
        if until is not None:
            query = query.where(TrainingRunRecord.started_at < until)
        return [{"name": row.name, "pipeline": "TrainingRun", "campaign": None,
                 "status": row.status, "started_at": _iso(row.started_at),
                 "dataset": row.dataset, "instance_type": row.instance_type,
                 "cost_usd": row.cost_usd, "actual": (row.cost or {}).get("actual"),
                 "goodput": (row.cost or {}).get("goodput"),
                 "estimated_max_usd": row.estimated_max_usd}
                for row in self.session.scalars(query)]

    def missing(self, execution_arns: Sequence[str]) -> list[str]:
        """Those of ``execution_arns`` that have no record, in the order given."""
        found = set(self.session.scalars(
            select(TrainingRunRecord.execution_arn)
            .where(TrainingRunRecord.execution_arn.in_(list(execution_arns))))
        ) if execution_arns else set()
        return [arn for arn in execution_arns if arn not in found]
