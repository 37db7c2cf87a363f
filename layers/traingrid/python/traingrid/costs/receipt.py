"""What a TrainingRun cost: a receipt of what it used, priced with ``costs.prices``.

- compute: each attempt's Batch job, from Batch's own timestamps (``startedAt`` to
  ``stoppedAt``, or now while it runs) × nodes × the instance's price, each node to its own
  ``stoppedAt`` where Batch describes them (a worker node lost mid-job: ``costs.node_time``);
  a failed or shrunk
  attempt's node-hours count as much as the last one's, and so does each attempt's wait in
  the queue (``createdAt`` to ``startedAt``: its instances launch, boot and pull the image then);
- file system: its lifetime (created to deleted, or so far) × capacity at its deployment type's
  price;
- orchestration: Step Functions state transitions and Lambda invocations, counted in the
  execution's history;
- staging: bytes copied between regions × the transfer price (campaigns; 0 for a TrainingRun).

Every line says where its figures came from, and ``goodput`` (``costs.goodput``) says how
much of the paid node-hours trained. Pure: tested without AWS.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from traingrid.costs import goodput, node_time, prices
from traingrid.vocabulary.statuses import ENDED_JOB_STATUSES, BatchJobStatus

PARTS = ("compute", "file_system", "orchestration", "staging")
CENT_FRACTION = Decimal("0.000001")
BATCH_TIMES = "Batch DescribeJobs startedAt → stoppedAt"
BATCH_WAIT = "Batch DescribeJobs createdAt → startedAt"
# The instances launch, boot and pull the image while the job is RUNNABLE/STARTING: EC2 bills
# each from its launch, so the wait is billed (at most: an instance launches within it).
WAIT_BILLED = "EC2 bills an instance from its launch, within the job's RUNNABLE wait (at most)"


@dataclass(frozen=True)
class AttemptUse:
    attempt: int
    nodes: int
    seconds: int
    job_id: str | None
    running: bool = False
    source: str = BATCH_TIMES + " (as the run measured it)"
    waited_s: int = 0  # RUNNABLE/STARTING: Batch createdAt → startedAt
    outcome: str | None = None  # why it failed (``training.attempts.classify``); None: it did not
    phases: dict[str, int] = field(default_factory=dict)  # node-seconds the job reported
    # Its nodes' running seconds added up (``costs.node_time``): a node lost mid-job is paid
    # to its loss only. None: not described node by node, so ``nodes`` × ``seconds``.
    node_seconds: int | None = None
    nodes_lost: int = 0

    @property
    def running_node_s(self) -> int:
        return self.nodes * self.seconds if self.node_seconds is None else self.node_seconds


@dataclass(frozen=True)
class FileSystemUse:
    id: str | None
    deployment_type: str
    per_unit_mb_s: int | None
    capacity_gib: int
    seconds: float
    source: str


@dataclass(frozen=True)
class SageMakerUse:
    """A region's SageMaker training job as DescribeTrainingJob reports it once it ends."""

    region: str
    job_name: str
    instance_type: str
    instance_count: int
    billable_s: int
    training_s: int
    price: prices.Price  # the campaign database's on-demand price in that region


@dataclass(frozen=True)
class StagingUse:
    what: str
    bytes: int
    price: prices.Price


@dataclass(frozen=True)
class UnpricedJob:
    """A region's job left off the receipt, and why (``costs.region_usage`` decides)."""

    region: str
    job_name: str
    reason: str


@dataclass
class RegionsUsed:
    """A fan-out's regions: their SageMaker jobs, staged copies and jobs left unpriced."""

    sagemaker: list[SageMakerUse] = field(default_factory=list)
    staging: list[StagingUse] = field(default_factory=list)
    unpriced: list[UnpricedJob] = field(default_factory=list)


@dataclass
class Usage:
    """What a run used, as far as it is known."""

    instance_type: str | None = None
    attempts: list[AttemptUse] = field(default_factory=list)
    file_system: FileSystemUse | None = None
    transitions: int | None = None
    lambda_invocations: int | None = None
    orchestration_source: str = "the execution's history (GetExecutionHistory)"
    fanout: bool = False
    sagemaker: list[SageMakerUse] | None = None  # a fan-out's regions' jobs; None: not known
    staging: list[StagingUse] = field(default_factory=list)
    unpriced_jobs: list[UnpricedJob] = field(default_factory=list)
    in_flight: bool = False
    # What the archive step left out of the job's reported figures, and why.
    ignored: list[str] = field(default_factory=list)

    def with_regions(self, used: RegionsUsed) -> Usage:
        """This fan-out's use with its regions' jobs and staging as priced from them."""
        return replace(self, sagemaker=used.sagemaker, staging=used.staging,
                       unpriced_jobs=used.unpriced)


def _amount(value: Decimal) -> Decimal:
    return value.quantize(CENT_FRACTION, rounding=ROUND_HALF_UP)


def _line(part: str, item: str, quantity: float, price: prices.Price) -> dict[str, Any]:
    amount = _amount(Decimal(str(quantity)) * Decimal(str(price.usd)))
    return {"part": part, "item": item, "quantity": round(quantity, 6), "unit": price.unit,
            "unit_usd": price.usd, "amount": amount, "source": price.source}


def _unpriced(part: str, item: str, source: str) -> dict[str, Any]:
    return {"part": part, "item": item, "quantity": None, "unit": None, "unit_usd": None,
            "amount": Decimal(0), "source": source}


def _region_lines(usage: Usage) -> list[dict[str, Any]]:
    """A fan-out's regions: each SageMaker job priced or said why not, each staged copy."""
    lines: list[dict[str, Any]] = []
    if usage.fanout and usage.sagemaker is None:
        lines.append(_unpriced("compute", "SageMaker training jobs", "not looked up here: "
                               "each region's DescribeTrainingJob BillableTimeInSeconds"))
    for job in usage.sagemaker or []:
        saved = 1 - job.billable_s / job.training_s if job.training_s else 0.0
        item = (f"SageMaker {job.job_name} in {job.region}: {job.instance_count} × "
                f"{job.instance_type}, billed {job.billable_s} of {job.training_s} s "
                f"(managed spot saved {saved:.0%})")
        line = _line("compute", item, job.instance_count * job.billable_s / 3600, job.price)
        lines.append(line | {"source": "DescribeTrainingJob BillableTimeInSeconds × "
                                       f"InstanceCount; {job.price.source}"})
    for unpriced in usage.unpriced_jobs:
        lines.append(_unpriced("compute", f"SageMaker {unpriced.job_name} in "
                                          f"{unpriced.region}", unpriced.reason))
    for staged in usage.staging:
        gb = staged.bytes / 1e9
        lines.append(_line("staging", f"{staged.what}: {gb:.3f} GB copied between regions",
                           gb, staged.price))
    return lines


def receipt(usage: Usage, estimate: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's cost: ``actual`` by part (adding up to ``total``) and every line behind it."""
    lines: list[dict[str, Any]] = []
    price = prices.instance_hour(usage.instance_type) if usage.instance_type else None
    for a in usage.attempts:
        lost = (f", {a.nodes_lost} node(s) lost mid-job: {a.running_node_s} node-seconds"
                if a.nodes_lost else "")
        item = (f"attempt {a.attempt}: {a.nodes} × {usage.instance_type}, {a.seconds} s"
                f"{' so far' if a.running else ''}{lost} (job {a.job_id or 'not submitted'})")
        if price is None:
            lines.append(_unpriced("compute", item, f"no price for {usage.instance_type!r} in "
                                                    f"prices version {prices.VERSION}"))
            continue
        line = _line("compute", item, a.running_node_s / 3600, price)
        each = " of each node" if a.node_seconds is not None else " × nodes"
        lines.append(line | {"source": f"{a.source}{each}; {price.source}"})
        if a.waited_s:
            wait = _line("compute", f"attempt {a.attempt}: {a.nodes} × {usage.instance_type} "
                                    f"launching and booting, {a.waited_s} s in the queue",
                         a.nodes * a.waited_s / 3600, price)
            lines.append(wait | {"source": f"{BATCH_WAIT} × nodes ({WAIT_BILLED}); "
                                           f"{price.source}"})
    fs = usage.file_system
    if fs is not None:
        gb_hour = prices.file_system_gb_hour(fs.deployment_type, fs.per_unit_mb_s)
        item = (f"FSx {fs.id or ''} {fs.deployment_type} {fs.capacity_gib} GiB for "
                f"{fs.seconds / 3600:.3f} h")
        if gb_hour is None:
            lines.append(_unpriced("file_system", item, f"no price for {fs.deployment_type}"))
        else:
            line = _line("file_system", item, fs.capacity_gib * fs.seconds / 3600, gb_hour)
            lines.append(line | {"source": f"{fs.source}; {gb_hour.source}"})
    for count, what, unit_price in (
            (usage.transitions, "Step Functions state transitions", prices.STATE_TRANSITION),
            (usage.lambda_invocations, "Lambda invocations", prices.LAMBDA_INVOCATION)):
        if count is None:
            lines.append(_unpriced("orchestration", what, usage.orchestration_source))
        else:
            line = _line("orchestration", f"{count} {what}", count, unit_price)
            lines.append(line | {"source": f"counted in {usage.orchestration_source}; "
                                            f"{unit_price.source}"})
    lines += _region_lines(usage)
    parts = {part: sum((line["amount"] for line in lines if line["part"] == part), Decimal(0))
             for part in PARTS}
    total = sum(parts.values(), Decimal(0))
    return {
        "estimate": estimate,
        "actual": {part: float(amount) for part, amount in parts.items()} | {
            "total": float(total)},
        "currency": prices.CURRENCY,
        "prices_version": prices.VERSION,
        "in_flight": usage.in_flight,
        "lines": [line | {"amount": float(line["amount"])} for line in lines],
        "goodput": None if usage.fanout else goodput.goodput(usage.attempts) | (
            {"ignored": usage.ignored} if usage.ignored else {}),
    }


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _phases(value: Any) -> dict[str, int]:
    return {k: _count(v) for k, v in _dict(value).items() if k in goodput.CAUSES}


def _notes(value: Any) -> list[str]:
    return [n for n in value if isinstance(n, str)] if isinstance(value, list) else []


def attempts_used(planned_job: dict[str, Any], job: dict[str, Any],
                  reported: Any = None) -> list[AttemptUse]:
    """Each attempt's nodes and Batch running time: an ended attempt's ``ran_s`` (Batch's
    timestamps, kept when NextAttempt closed it), the current one's from the job's state,
    with ``reported``: the node-seconds by cause its trainer reported (the archive step's
    ``phases``, ``training.recoveries``)."""
    used = []
    closed = {a.get("job_id") for a in planned_job.get("attempts") or [] if "ran_s" in a}
    for a in planned_job.get("attempts") or []:
        if not isinstance(a, dict):
            continue
        nodes = _count(a.get("nodes"))
        if "ran_s" in a:
            used.append(AttemptUse(_count(a.get("attempt")), nodes, _count(a.get("ran_s")),
                                   a.get("job_id"), waited_s=_count(a.get("waited_s")),
                                   outcome=str(a.get("outcome") or "failed"),
                                   phases=_phases(a.get("phases"))))
        elif job.get("id") and job.get("id") not in closed:
            running = job.get("status") not in ENDED_JOB_STATUSES
            failed = job.get("status") == BatchJobStatus.FAILED
            used.append(AttemptUse(_count(a.get("attempt")), nodes,
                                   _count(job.get("running_s")), job.get("id"), running,
                                   waited_s=_count(job.get("waiting_s")),
                                   outcome=str(job.get("status_reason") or "failed")
                                   if failed else None, phases=_phases(reported)))
    return used


def with_batch_times(usage: Usage, described: list[dict[str, Any]], now_ms: int,
                     nodes: list[dict[str, Any]] | None = None) -> Usage:
    """Each attempt's time from its job's own DescribeJobs entry (``startedAt`` to
    ``stoppedAt``, or now while it runs): what the run measured stops when the run stops
    watching (a stopped run's job runs on until it is terminated). Jobs Batch no longer
    reports keep what the run measured. ``nodes``: DescribeJobs of their nodes
    (``node_time.node_ids``), each node paid to its own stop (``node_time.of_job``)."""
    jobs = {job.get("jobId"): job for job in described}
    attempts = []
    for a in usage.attempts:
        job = jobs.get(a.job_id)
        if job is None:
            attempts.append(a)
            continue
        started, stopped = job.get("startedAt"), job.get("stoppedAt")
        seconds = max(0, ((stopped or now_ms) - started) // 1000) if started else 0
        created = job.get("createdAt")
        waited = (max(0, ((started or stopped or now_ms) - created) // 1000) if created
                  else a.waited_s)
        each = node_time.of_job(job, nodes or [], now_ms)
        attempts.append(replace(a, seconds=seconds, running=bool(started and not stopped),
                                source=BATCH_TIMES, waited_s=waited,
                                node_seconds=each.node_seconds if each else None,
                                nodes_lost=each.nodes_lost if each else 0))
    return replace(usage, attempts=attempts)


def _file_system(plan: dict[str, Any], state: Mapping[str, Any], seconds: float, source: str
                 ) -> FileSystemUse | None:
    planned = _dict(plan.get("file_system"))
    lustre = _dict(planned.get("lustre_configuration"))
    capacity = _count(planned.get("storage_capacity_gib"))
    if not (capacity and lustre.get("DeploymentType")):
        return None
    return FileSystemUse(_dict(state.get("file_system")).get("id"), lustre["DeploymentType"],
                         lustre.get("PerUnitStorageThroughput"), capacity, max(seconds, 0.0),
                         source)


def from_state(state: Mapping[str, Any], file_system_s: float,
               file_system_source: str) -> Usage:
    """What a run's state says it used: its attempts and its file system (for
    ``file_system_s``, measured by the caller)."""
    plan = _dict(state.get("plan"))
    planned_job = _dict(plan.get("job"))
    fs = (_file_system(plan, state, file_system_s, file_system_source)
          if _dict(state.get("file_system")).get("id") else None)
    archived = _dict(state.get("archive"))
    return Usage(instance_type=planned_job.get("instance_type"),
                 attempts=attempts_used(planned_job, _dict(state.get("job")),
                                        archived.get("phases")),
                 file_system=fs, ignored=_notes(archived.get("ignored")))


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def latest_state(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's state as the last state that carried its plan left it (or entered with it)."""
    for event in reversed(events):
        details = event.get("stateExitedEventDetails") or event.get("stateEnteredEventDetails")
        found = _json((details or {}).get("output") or (details or {}).get("input"))
        if isinstance(found, dict) and isinstance(found.get("plan"), dict):
            return found
    return {}


def _is_lambda(event: dict[str, Any]) -> bool:
    return event["type"] == "LambdaFunctionScheduled" or (
        event["type"] == "TaskScheduled"
        and _dict(event.get("taskScheduledEventDetails")).get("resourceType") == "lambda")


def from_history(events: list[dict[str, Any]], ended_at: datetime, running: bool,
                 seconds: Callable[[datetime, datetime], float]) -> Usage:
    """What a TrainingRun used, from its execution's history (``ended_at``: when it stopped,
    or now). ``seconds`` measures an interval of the history's timestamps."""
    state = latest_state(events)
    created = next((e["timestamp"] for e in events
                    if _dict(e.get("stateEnteredEventDetails")).get("name")
                    == "CreateFileSystem"), None)
    deleted = next((e["timestamp"] for e in events
                    if _dict(e.get("stateExitedEventDetails")).get("name")
                    == "DeleteFileSystem"), None)
    if created is None:
        fs_s, source = 0.0, ""
    elif deleted is not None:
        fs_s = seconds(created, deleted)
        source = "CreateFileSystem entered → DeleteFileSystem exited (execution history)"
    else:
        fs_s = seconds(created, ended_at)
        source = ("CreateFileSystem entered → now (still up)" if running else
                  "CreateFileSystem entered → the run's end (not deleted by the run: the "
                  "janitor's or kept; its time after the run is not counted here)")
    usage = from_state(state, fs_s, source) if created is not None else from_state(
        {k: v for k, v in state.items() if k != "file_system"}, 0.0, "")
    usage.transitions = sum(1 for e in events if e["type"].endswith("StateEntered"))
    usage.lambda_invocations = sum(1 for e in events if _is_lambda(e))
    usage.in_flight = running
    return usage


def training_run_cost(events: list[dict[str, Any]], ended_at: datetime, running: bool,
                      estimate: Mapping[str, Any] | None,
                      seconds: Callable[[datetime, datetime], float],
                      describe_jobs: Callable[[list[str]], list[dict[str, Any]]] | None = None,
                      now_ms: int = 0, later_transitions: int = 0) -> dict[str, Any]:
    """A TrainingRun's receipt from its execution's history (``from_history``), each attempt's
    time and queue wait from ``describe_jobs`` (Batch's DescribeJobs; ``now_ms`` for a job
    still running), and ``later_transitions``: the states it will still enter."""
    usage = from_history(events, ended_at, running, seconds)
    job_ids = [a.job_id for a in usage.attempts if a.job_id]
    if describe_jobs is not None and job_ids:
        described = describe_jobs(job_ids)
        ids = node_time.node_ids(described)
        nodes = describe_jobs(ids) if ids else []
        usage = with_batch_times(usage, described, now_ms, nodes)
    if usage.transitions is not None:
        usage.transitions += later_transitions
    return receipt(usage, estimate)


def fanout_usage(events: list[dict[str, Any]], output: Any, running: bool) -> Usage:
    """What a CampaignFanout's orchestration and staging used (at the table's transfer price).
    Its regions' SageMaker time is added by a caller that can describe their jobs."""
    jobs = output.get("jobs") if isinstance(output, dict) else None
    staging = [StagingUse(f"{j.get('requested_region')} → {j.get('region')}",
                          _count(j.get("staged_bytes")), prices.INTER_REGION_TRANSFER)
               for j in jobs or [] if isinstance(j, dict) and _count(j.get("staged_bytes"))]
    return Usage(transitions=sum(1 for e in events if e["type"].endswith("StateEntered")),
                 lambda_invocations=sum(1 for e in events if _is_lambda(e)),
                 staging=staging, in_flight=running, fanout=True)


def recorded_regions(regions: dict[str, Any]) -> RegionsUsed:
    """A fan-out's regions' use as its run recorded it (``costs.region_usage.recorded``)."""
    def price(found: dict[str, Any]) -> prices.Price:
        return prices.Price(float(found["usd"]), str(found["unit"]), str(found["source"]))

    return RegionsUsed(
        sagemaker=[SageMakerUse(**(use | {"price": price(use["price"])}))
                   for use in regions.get("sagemaker") or []],
        staging=[StagingUse(**(use | {"price": price(use["price"])}))
                 for use in regions.get("staging") or []],
        unpriced=[UnpricedJob(**job) for job in regions.get("unpriced") or []])
