"""``traingrid faults``: every Task state of both pipelines × every fault (service error,
throttling storm, timeout, abort), each run on the emulator, each checked end to end.

For each cell a run starts with the fault at that state (and, for a state only a failure
reaches, the fault that leads there), ends, and the janitor runs on its schedule until it has
nothing left to wait for. Then:

- the run ended as expected (ABORTED for an abort; FAILED otherwise, unless the pipeline has
  another way past that step: ``RECOVERS``), and a FAILED run's cause says what happened and
  what to do (``What to do: …``, or the run's own advice);
- no file system, Batch job or SageMaker job is left without a running execution (a kept file
  system, whose outputs could not be archived, is accounted for until its expiry);
- nothing archived was deleted: every object in S3 when the run ended is still there, the
  same, and every file a deleted file system held under ``runs/`` is in S3;
- the outcome is held in the campaign database: a fan-out's run is closed (not RUNNING), with
  no region job left open, SUCCEEDED only if every region completed; a TrainingRun has its
  record with its execution's status and error, a cause if it did not succeed, and a succeeded
  one's manifest, which is in S3.

One deployment serves every cell of a pipeline, on a fast simulated clock.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from moto.fsx.models import fsx_backends

from traingrid.db.engine import transaction
from traingrid.db.repositories import RunRepository, TrainingRunRepository
from traingrid.vocabulary.campaign_fanout import FINAL_JOB_STATUSES, RegionJobStatus
from traingrid_local.demo.runner import pass_time, settle, upload_sample_dataset
from traingrid_local.demo.scenarios import FAULT_KINDS, PIPELINES
from traingrid_local.emulator import fsx
from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.emulator.fault_injection import StateFault
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator
from traingrid_local.stack import eks_cluster, report, sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET, Deployment, deploy_traingrid

ROOT = Path(__file__).resolve().parents[3]
# A pipeline's other state machines, whose executions its own start (a fan-out's branches):
# their Task states are cells of the pipeline too.
NESTED = {"campaign": ("statemachines/campaign_region.asl.json",)}
SPEED = 4000.0
TRAINING_SECONDS = 3600
# FSx storage, GiB, an account raised for every cell of a pipeline to keep its file system.
CELLS_FSX_QUOTA_GIB = 5_000_000
RUN_TIMEOUT_S = 180.0
# States only a failure leads to, and the faults (named, at a state) that lead there.
REACH: dict[tuple[str, str], tuple[frozenset[str], dict[str, StateFault]]] = {
    ("training", "StopTrainingJob"): (frozenset(), {
        "AwaitTrainingJob": StateFault("service-error")}),
    # A failed job leads to the choice of another attempt; a lost node, to a resubmission.
    ("training", "NextAttempt"): (frozenset({"node-lost"}), {}),
    # The job exports its outputs as it ends; an export task runs only when it could not
    # (its host was lost, on its last attempt).
    ("training", "StartExport"): (frozenset({"node-lost-every-attempt"}), {}),
    ("training", "CheckExport"): (frozenset({"node-lost-every-attempt"}), {}),
    ("training", "WriteManifest"): (frozenset({"node-lost-every-attempt"}), {}),
    ("training", "RetainFileSystem"): (frozenset({"export-failed"}), {}),
    ("training", "ExplainFailure"): (frozenset({"batch-job-failed"}), {}),
    ("training", "RecordFailure"): (frozenset({"batch-job-failed"}), {}),
    ("campaign", "NextRegion"): (frozenset({"sagemaker-capacity"}), {}),
    # Data is copied only for a job that moved to another region.
    ("campaign", "StageInput"): (frozenset({"sagemaker-capacity"}), {}),
    ("campaign", "RecordRegionFailure"): (frozenset(), {
        "AwaitRegionJob": StateFault("service-error")}),
    ("campaign", "StopRegionJob"): (frozenset(), {
        "AwaitRegionJob": StateFault("service-error")}),
}
# Where the pipeline gets past a failure itself, and how the run ends then.
RECOVERS = {
    # A failed check of the job's own archive falls back to an export task.
    ("training", "CheckArchive"): "SUCCEEDED",
    # A run whose record failed still succeeded; the janitor records it.
    ("training", "RecordSuccess"): "SUCCEEDED",
    # A region whose record failed still trained; its fan-out's FinishFanout records it.
    ("campaign", "RecordRegionJob"): "SUCCEEDED",
}
# An abort of a training run comes this far into the state (while its job trains).
ABORT_AFTER_S = {("training", "AwaitTrainingJob"): 1800.0}
# Causes that say what to do: the advice TrainGrid adds, or the run's own error's advice.
WHAT_TO_DO = ("What to do", "copy its outputs", "Copy what you need", "Check the training logs")

# Task states the sample dataset (one listing page) never reaches: MeasureDataset lists on
# where Plan's time ran out. Its Retry and Catch are Plan's; tests/integration/test_plan_scale.py
# drives its loop. Named with --state, its cells run (and say it was never reached).
LARGE_DATASETS_ONLY = frozenset({"MeasureDataset"})

# The outputs a training job rewrites while it trains (traingrid_trainer.watch): its curves.
GROWING = ("metrics", "tensorboard")


def task_states(definition: dict[str, Any]) -> list[str]:
    """Every Task state, Map and Parallel branches included, in definition order."""
    found = []
    for name, state in definition["States"].items():
        if state["Type"] == "Task":
            found.append(name)
        for branch in [state.get("ItemProcessor") or state.get("Iterator"),
                       *state.get("Branches", [])]:
            if branch:
                found += task_states(branch)
    return found


def pipeline_states(pipeline: str) -> list[str]:
    return [state for path in (PIPELINES[pipeline][1], *NESTED.get(pipeline, ()))
            for state in task_states(json.loads((ROOT / path).read_text()))]


def nested_states(pipeline: str) -> set[str]:
    return {state for path in NESTED.get(pipeline, ())
            for state in task_states(json.loads((ROOT / path).read_text()))}


# TrainingRun states only one backend's deployment reaches (its SubmitJob state).
BACKEND_STATES = {"SubmitTrainingJob": "ecs", "SubmitTrainingPods": "eks"}


@dataclass(frozen=True)
class Cell:
    pipeline: str
    state: str
    fault: str
    backend: str = "ecs"  # the deployment it runs on: ecs, or eks (EksClusterName)

    def faults(self) -> tuple[frozenset[str], dict[str, StateFault]]:
        named, at_states = REACH.get((self.pipeline, self.state), (frozenset(), {}))
        after_s = ABORT_AFTER_S.get((self.pipeline, self.state), 0.0) if (
            self.fault == "abort") else 0.0
        return named, {**at_states, self.state: StateFault(self.fault, after_s)}

    @property
    def expected(self) -> str:
        """Every fault here outlasts what the step's retries absorb: the run is stopped, or
        fails, unless the pipeline has another way past that step."""
        if self.fault == "abort":
            # A branch's execution stopped fails its region, not the fan-out's execution.
            return "FAILED" if self.state in nested_states(self.pipeline) else "ABORTED"
        return RECOVERS.get((self.pipeline, self.state), "FAILED")

    @property
    def name(self) -> str:
        words = re.sub(r"[^A-Za-z0-9]+", "-", f"fm-{self.state}-{self.fault}").strip("-")
        return f"{words}-{int(time.time() * 1000) % 10**8}"[:80]


def cells(pipelines: Iterable[str] = tuple(PIPELINES), states: Iterable[str] | None = None,
          kinds: Iterable[str] = FAULT_KINDS, backend: str | None = None) -> list[Cell]:
    """The matrix (or the part of it asked for); unknown names are an error. Its TrainingRun
    cells run on ``backend``'s deployment (without one: each on the backend that reaches its
    state, ECS but for EKS's SubmitJob state)."""
    pipelines, kinds = list(pipelines), list(kinds)
    wanted = set(states) if states is not None else None
    problems = [f"unknown pipeline {p!r} (known: {', '.join(PIPELINES)})"
                for p in pipelines if p not in PIPELINES]
    problems += [f"unknown fault {k!r} (known: {', '.join(FAULT_KINDS)})"
                 for k in kinds if k not in FAULT_KINDS]
    problems += eks_cluster.backend_problems(backend) if backend is not None else []
    known = {s for p in pipelines if p in PIPELINES for s in pipeline_states(p)}
    problems += [f"no Task state {s!r} in {' or '.join(pipelines)} (known: "
                 f"{', '.join(sorted(known))})" for s in sorted(wanted or ()) if s not in known]
    if problems:
        raise ValueError("; ".join(problems))
    def on(pipeline: str, state: str) -> str | None:  # None: that backend never reaches it
        only = BACKEND_STATES.get(state) if pipeline == "training" else None
        if backend is None or pipeline != "training":
            return only or "ecs"
        return backend if only in (None, backend) else None

    return [Cell(p, s, k, b) for p in pipelines for s in pipeline_states(p)
            if (s in wanted if wanted is not None else s not in LARGE_DATASETS_ONLY)
            and (b := on(p, s)) is not None for k in kinds]


@dataclass
class CellResult:
    cell: Cell
    status: str | None = None
    error: str | None = None
    cause: str | None = None
    leaked: list[dict[str, Any]] = field(default_factory=list)
    retained: list[dict[str, Any]] = field(default_factory=list)
    janitor_actions: int = 0
    janitor_passes: int = 0
    database: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self.cell), "expected": self.cell.expected, "ok": self.ok,
                **{k: v for k, v in asdict(self).items() if k != "cell"},
                "leaked_count": len(self.leaked)}


# --- one cell --------------------------------------------------------------------------


def _objects(emulator: Emulator, deployment: Deployment) -> dict[str, str]:
    """Every archived object (data bucket ``runs/``, artifact buckets): URI → ETag."""
    buckets = [(emulator.region, deployment.stack.outputs["DataBucketName"], "runs/")] + [
        (region, stack.outputs["ArtifactBucketName"], "")
        for region, stack in deployment.regional.items()]
    found = {}
    for region, bucket, prefix in buckets:
        s3 = emulator.client("s3", region)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                found[f"s3://{bucket}/{item['Key']}"] = item["ETag"]
    return found


def _unsafe_deletions(emulator: Emulator, data_bucket: str) -> list[str]:
    """Files under ``runs/`` of deleted file systems that are not in S3, byte for byte."""
    s3 = emulator.client("s3")
    missing = []
    for fs_id, record in fsx.deleted(fsx_backends[ACCOUNT_ID][emulator.region]).items():
        for path, data in record["files"].items():
            if not path.startswith("runs/"):
                continue
            try:
                body = s3.get_object(Bucket=data_bucket, Key=path)["Body"].read()
            except s3.exceptions.NoSuchKey:
                body = None
            if body != data:
                missing.append(f"{fs_id}:{path}")
    return missing


def _database_problems(deployment: Deployment, execution_arn: str) -> tuple[dict[str, Any] | None,
                                                                            list[str]]:
    with transaction(deployment.database_url) as session:
        run = RunRepository(session).get(execution_arn)
        if run is None:
            return None, ["the campaign database has no run for this execution"]
        held = {"status": run.status, "failure_cause": run.failure_cause,
                "jobs": {j.requested_region: j.status for j in run.jobs}}
        problems = []
        if run.status == "RUNNING" or run.ended_at is None:
            problems.append(f"the database still says {run.status}, with no end")
        if open_jobs := [r for r, s in held["jobs"].items() if s not in FINAL_JOB_STATUSES]:
            problems.append(f"region jobs without an outcome: {open_jobs}")
        all_completed = all(s == RegionJobStatus.COMPLETED for s in held["jobs"].values())
        if (run.status == "SUCCEEDED") != (all_completed and bool(held["jobs"])):
            problems.append(f"the run is {run.status} but its jobs are {held['jobs']}")
        if run.status == "FAILED" and not run.failure_cause:
            problems.append("the failed run has no cause")
        return held, problems


def _training_problems(emulator: Emulator, deployment: Deployment, execution_arn: str,
                       status: str, error: str | None) -> tuple[dict[str, Any] | None,
                                                             list[str]]:
    with transaction(deployment.database_url) as session:
        record = TrainingRunRepository(session).get(execution_arn)
        if record is None:
            return None, ["the campaign database has no record of this run"]
        held = {"status": record.status, "error": record.error,
                "recorded_by": record.recorded_by, "manifest": record.manifest,
                "failure_cause": record.failure_cause}
    problems = []
    # Stopped while it recorded its outcome: the outcome it recorded stands.
    recorded_before_stop = status == "ABORTED" and record.recorded_by == "run"
    if not recorded_before_stop and (record.status, record.error) != (
            status, error if status != "ABORTED" else "ABORTED"):
        problems.append(f"the database says {record.status} ({record.error}), the execution "
                        f"{status} ({error})")
    if record.status != "SUCCEEDED" and not record.failure_cause:
        problems.append("the record of a run that did not succeed has no cause")
    if record.status == "SUCCEEDED" and not _exists(emulator, record.manifest):
        problems.append(f"the run succeeded without its manifest: {record.manifest}")
    return held, problems


def _exists(emulator: Emulator, uri: str | None) -> bool:
    if not uri:
        return False
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    listing = emulator.client("s3").list_objects_v2(Bucket=bucket, Prefix=key)
    return any(o["Key"] == key for o in listing.get("Contents", []))


def _history_states(emulator: Emulator, execution_arn: str,
                    deployment: Deployment | None = None) -> set[str]:
    """The states the run entered, in its own history and its branches' (the executions it
    started: ``AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID`` in their input)."""
    runs, sfn = [execution_arn], emulator.client("stepfunctions")
    if deployment is not None and (
            nested := deployment.stack.outputs.get("CampaignRegionStateMachineArn")):
        for child in sfn.list_executions(stateMachineArn=nested)["executions"]:
            started_by = json.loads(sfn.describe_execution(executionArn=child["executionArn"])[
                "input"]).get("AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID")
            if started_by == execution_arn:
                runs.append(child["executionArn"])
    return {e["stateEnteredEventDetails"]["name"]
            for run in runs for e in report.history(emulator, run)
            if e["type"].endswith("StateEntered")}


def _start(emulator: Emulator, deployment: Deployment, cell: Cell) -> str:
    machine = deployment.stack.outputs[PIPELINES[cell.pipeline][2]]
    if cell.pipeline == "training":
        payload: dict[str, Any] = {"request": {
            "dataset": f"s3://{DEMO_BUCKET}/imagenet2012/resized/", "nodes": 4}}
    else:
        payload = {"campaign": sample_campaign.CAMPAIGN, "settle_s": 0,
                   "options": {"datasets": "all"}, "trigger": {"source": "faults"}}
    return emulator.client("stepfunctions").start_execution(
        stateMachineArn=machine, name=cell.name, input=json.dumps(payload))["executionArn"]


def _wait(emulator: Emulator, execution_arn: str, timeout_s: float) -> dict[str, Any]:
    sfn = emulator.client("stepfunctions")
    deadline = time.monotonic() + timeout_s
    while True:
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        pass_time(0.1, True, None)  # skipping the simulated time in which nothing works


def run_cell(emulator: Emulator, deployment: Deployment, cell: Cell) -> CellResult:
    started = time.monotonic()
    result = CellResult(cell)
    named, at_states = cell.faults()
    emulator.set_faults(named, at_states)
    try:
        arn = _start(emulator, deployment, cell)
        described = _wait(emulator, arn, RUN_TIMEOUT_S)
        before = _objects(emulator, deployment)
        passes = settle(emulator, deployment, fast_forward=True)
    finally:
        emulator.set_faults()
    built = report.build(emulator, deployment, [arn], passes)
    entry = built["executions"][0]
    result.status, result.error, result.cause = entry["status"], entry["error"], entry["cause"]
    result.leaked, result.retained = built["leaked_resources"], built["retained_resources"]
    result.janitor_passes = len(passes)
    result.janitor_actions = sum(a["run"] == described["name"]
                                 for a in built["janitor"]["actions"])
    problems = result.problems
    if cell.state not in _history_states(emulator, arn, deployment):
        problems.append(f"the run never reached {cell.state}")
    if result.status != cell.expected:
        problems.append(f"ended {result.status}, expected {cell.expected}")
    if result.status == "FAILED" and not (result.cause and not result.cause.startswith("{")
                                          and any(w in result.cause for w in WHAT_TO_DO)):
        problems.append(f"the cause does not say what to do: {result.cause!r}")
    if result.leaked:
        problems.append(f"{len(result.leaked)} resource(s) leaked: {result.leaked}")
    if errors := built["janitor"]["errors"]:
        problems.append(f"the janitor reported errors: {errors}")
    after = _objects(emulator, deployment)
    # A job the run let go of (aborted, stopped late) may still be training: its curves grow
    # and are exported again, by design; deleted they must not be.
    if lost := [uri for uri, etag in before.items() if after.get(uri) != etag
                and not (uri in after and any(f"/outputs/{grows}/" in uri for grows in GROWING))]:
        problems.append(f"archived objects deleted or changed: {lost}")
    if unsafe := _unsafe_deletions(emulator, deployment.stack.outputs["DataBucketName"]):
        problems.append(f"deleted before archived: {unsafe}")
    if cell.pipeline == "campaign":
        result.database, db_problems = _database_problems(deployment, arn)
        problems += db_problems
    else:
        result.database, db_problems = _training_problems(emulator, deployment, arn,
                                                          result.status, result.error)
        problems += db_problems
    result.wall_s = round(time.monotonic() - started, 1)
    return result


# --- the matrix ----------------------------------------------------------------------------


def _prepare(emulator: Emulator, deployment: Deployment, pipeline: str) -> None:
    if pipeline == "training":
        upload_sample_dataset(emulator)
    else:
        sample_campaign.seed(deployment)
        sample_campaign.register_without_markers(emulator, deployment)


def run(selected: list[Cell], speed: float = SPEED, database_dir: Path | None = None,
        progress: Callable[[CellResult], None] | None = None,
        after: Callable[[Emulator, Deployment], None] | None = None) -> list[CellResult]:
    """Run the cells, one emulator and deployment per pipeline and backend (``after`` sees
    each before it closes)."""
    results = []
    training = {"batch": TRAINING_SECONDS, "sagemaker": TRAINING_SECONDS}
    for pipeline, backend in dict.fromkeys((c.pipeline, c.backend) for c in selected):
        with Emulator(speed=speed, training_seconds=training) as emulator:
            # The cells' runs share one account, and the cells that keep a file system keep
            # it to the end: FSx's default storage quota (100,800 GiB) holds a few of them.
            ACCOUNT.raise_fsx_storage(CELLS_FSX_QUOTA_GIB)
            url = (f"sqlite:///{database_dir / f'faults-{pipeline}-{backend}.db'}"
                   if database_dir else None)
            deployment = deploy_traingrid(
                emulator, database_url=url,
                parameters=eks_cluster.backend_parameters(emulator, backend))
            try:
                _prepare(emulator, deployment, pipeline)
                for cell in (c for c in selected
                             if (c.pipeline, c.backend) == (pipeline, backend)):
                    results.append(run_cell(emulator, deployment, cell))
                    if progress is not None:
                        progress(results[-1])
                if after is not None:
                    after(emulator, deployment)
            finally:
                deployment.close()
    return results


def table_rows(results: list[CellResult]) -> dict[str, list[list[str]]]:
    """Pipeline → rows of state, then one ``END STATE · leaked N`` per fault kind."""
    by_pipeline: dict[str, dict[str, dict[str, CellResult]]] = {}
    for result in results:
        cell = result.cell
        by_pipeline.setdefault(cell.pipeline, {}).setdefault(cell.state, {})[cell.fault] = result
    rows: dict[str, list[list[str]]] = {}
    for pipeline, states in by_pipeline.items():
        rows[pipeline] = [[state] + [
            (f"{r.status} · {len(r.leaked)} leaked" + ("" if r.ok else " ✗"))
            if (r := faults.get(kind)) else "-" for kind in FAULT_KINDS]
            for state, faults in states.items()]
    return rows
