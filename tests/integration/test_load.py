"""Load on the upload trigger: 50 manifests uploaded at once, and one manifest uploaded 50 times
at once. Exactly one run per manifest starts (S3's duplicates are named alike), every run
trains to the end, and Batch's SubmitJob never sees more than its account limit of 50 calls
in any second: the calls beyond it are throttled and the state machine's retries absorb them.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from traingrid_local.demo.runner import wait_for_runs
from traingrid_local.emulator import throttling
from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.emulator.session import ACCOUNT_ID
from traingrid_local.stack import report
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e

DISTINCT = 50
DUPLICATES = 50
SHARED = "load/shared/"
DATASET = "load/data/"
# Fast enough that 51 runs of a simulated hour and more end in seconds; the clock stands still
# while any execution or function works, so every state still sees its own simulated time.
SPEED = 20_000.0
LOAD_FSX_QUOTA_GIB = 10_000_000
SUBMIT_LIMIT = throttling.ACCOUNT_RATE_LIMITS["batch:submitjob"]


def prefix(index: int) -> str:
    return f"load/ds-{index:02d}/"


def upload_dataset(s3) -> str:
    """One dataset that every manifest trains on (each names it): the runs differ by manifest."""
    s3.put_object(Bucket=DEMO_BUCKET, Key=DATASET + "shard-00000.tfrecord", Body=b"\0" * 65536)
    return f"s3://{DEMO_BUCKET}/{DATASET}"


def within_one_real_minute(seconds_needed: float = 20.0) -> None:
    """S3 stamps an upload's LastModified in real time and a run is named for its minute: a
    manifest uploaded again in the next minute is rightly a new run. Start the burst early
    enough in a minute that all of it lands in that minute."""
    second = datetime.now(UTC).second + datetime.now(UTC).microsecond / 1e6
    if second > 60 - seconds_needed:
        time.sleep(60.5 - second)


def upload_at_once(emulator, uploads: list[tuple[str, bytes]]) -> None:
    """Every upload from its own thread, released together, while the account's clock
    stands still: they land at the same simulated instant, as simultaneous uploads do."""
    s3 = emulator.client("s3")
    gate = threading.Barrier(len(uploads))

    def put(upload: tuple[str, bytes]) -> None:
        key, body = upload
        gate.wait(30)
        s3.put_object(Bucket=DEMO_BUCKET, Key=key, Body=body)

    with emulator.paused(), ThreadPoolExecutor(max_workers=len(uploads)) as pool:
        list(pool.map(put, uploads))


def test_100_uploads_start_51_runs_that_all_succeed_within_batchs_submit_limit(emulated):
    started = time.monotonic()
    emulator, deployment = emulated("happy", speed=SPEED)
    # 51 file systems at once: more than FSx's default storage quota holds (test_fsx_quota).
    ACCOUNT.raise_fsx_storage(LOAD_FSX_QUOTA_GIB)
    s3 = emulator.client("s3")
    dataset = upload_dataset(s3)
    distinct = [(prefix(i) + "manifest.json",
                 json.dumps({"dataset": dataset, "nodes": 1 + i % 4}).encode())
                for i in range(DISTINCT)]
    duplicates = [(SHARED + "manifest.json",
                   json.dumps({"dataset": dataset, "nodes": 2}).encode())] * DUPLICATES

    within_one_real_minute()
    upload_at_once(emulator, distinct + duplicates)
    uploaded = time.monotonic()
    machine = deployment.stack.outputs["TrainingRunStateMachineArn"]
    arns = wait_for_runs(emulator, [machine], 240, None)
    ended = time.monotonic()

    sfn = emulator.client("stepfunctions")
    executions = [sfn.describe_execution(executionArn=arn) for arn in arns]
    names = sorted(e["name"] for e in executions)
    assert len(names) == len(set(names)) == DISTINCT + 1, names
    subjects = sorted(name.rsplit("-", 2)[0] for name in names)
    assert subjects == sorted([f"load-ds-{i:02d}" for i in range(DISTINCT)] + ["load-shared"])
    failed = {e["name"]: (e.get("error"), e.get("cause")) for e in executions
              if e["status"] != "SUCCEEDED"}
    assert failed == {}

    # Every run's job was submitted once, within the account's limit in every second.
    batch = emulator.client("batch")
    queue = deployment.stack.outputs["TrainingJobQueueArn"]
    jobs = [j["jobName"] for status in ("SUCCEEDED", "FAILED", "RUNNING", "RUNNABLE")
            for j in batch.list_jobs(jobQueue=queue, jobStatus=status)["jobSummaryList"]]
    assert sorted(jobs) == names
    accepted = throttling.RATES.accepted("batch:submitjob", ACCOUNT_ID, emulator.region)
    refused = throttling.RATES.refused("batch:submitjob", ACCOUNT_ID, emulator.region)
    peak = throttling.peak_per_window(accepted)
    assert len(accepted) == DISTINCT + 1
    assert peak <= SUBMIT_LIMIT

    # Whatever the limit refused (the runs reach SubmitJob within moments of each other, how
    # many within one second depends on their polling), the state machine's Retry (backoff,
    # full jitter) got through: every refusal is a retried task failure, none ended a run.
    throttled = [event for arn in arns for event in report.history(emulator, arn)
                 if event["type"] == "TaskFailed"
                 and event["taskFailedEventDetails"]["resource"] == "submitJob"]
    assert len(throttled) == refused
    assert all("Rate exceeded" in e["taskFailedEventDetails"]["cause"] for e in throttled)

    print(f"\nload: {len(names)} executions from {DISTINCT + DUPLICATES} uploads, all "
          f"SUCCEEDED; SubmitJob peak {peak}/s (limit {SUBMIT_LIMIT}), {refused} throttled "
          f"and retried; uploads {uploaded - started:.1f} s, runs {ended - uploaded:.1f} s "
          f"wall")
