"""The stalled-run alarm the stack deploys, fed by what the runs' jobs print: a job's own
command can print the nodes' metric lines for any run (CloudWatch extracts any line in the
embedded metric format, from any log group), and another run's stall is still told.

Two runs' jobs are submitted as the TrainingRun submits them (the stack's queue and job
definition, the run in TRAINGRID_RUN); each node's heartbeat lines are written to its job's
log stream as the awslogs driver writes them (the emulated job writes none itself), made by
the node program's own reporter. The forger's command also prints, every minute, a line for a
run that does not exist, held far over the threshold, and one for the stalling run's own node
saying it stalled for 0 seconds."""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from traingrid_local.emulator.clock import CLOCK
from traingrid_node import emf

MINUTES = 45
STOPS_AT = 10  # the stalling run's steps stop in this minute
NODES = ("ip-10-0-1-7", "ip-10-0-1-8")


def _heartbeats(run: str, node: str, start: float, stops_at: int | None = None) -> list[str]:
    """A node's lines, minute by minute: a logged window while it steps, a heartbeat at the
    end of every minute (the reporter's thread's)."""
    now = [start]
    out = io.StringIO()
    reporter = emf.Reporter(run, node, out=out, clock=lambda: now[0], ranks=8)
    for minute in range(MINUTES):
        if stops_at is None or minute < stops_at:
            now[0] = start + 60 * minute + 30
            reporter.window(steps=40, seconds=30.0, batch=256, loss=2.0, lr=0.1)
        now[0] = start + 60 * minute + 59
        reporter.heartbeat()
    return out.getvalue().splitlines()


def _forged(start: float, stalling: str) -> list[str]:
    return [line for minute in range(MINUTES) for line in (
        emf.line({"StalledSeconds": 86_400.0}, "no-such-run", "x",
                 int((start + 60 * minute + 58) * 1000)),
        emf.line({"StepsCompleted": 999, "StalledSeconds": 0.0}, stalling, NODES[0],
                 int((start + 60 * minute + 58) * 1000)))]


def _submit(emulator: Any, stack: Any, run: str) -> list[str]:
    """The run's job, and each node's log stream."""
    batch = emulator.client("batch")
    job = batch.submit_job(
        jobName=run, jobQueue=stack.outputs["TrainingJobQueueArn"],
        jobDefinition=stack.resources["TrainingJobDefinition"],
        nodeOverrides={"numNodes": len(NODES), "nodePropertyOverrides": [
            {"targetNodes": "0:", "containerOverrides": {"environment": [
                {"name": "TRAINGRID_RUN", "value": run}]}}]})
    nodes = batch.describe_jobs(jobs=[f"{job['jobId']}#{k}" for k in range(len(NODES))])
    return [node["container"]["logStreamName"] for node in nodes["jobs"]]


def _write(emulator: Any, group: str, stream: str, lines: list[str]) -> None:
    logs = emulator.client("logs")
    if not logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=stream)[
            "logStreams"]:
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
    now_ms = int(time.time() * 1000)  # as the log driver stamps them: CloudWatch Logs' time
    logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
        {"timestamp": now_ms, "message": line} for line in lines])


def test_a_forged_line_from_one_runs_job_does_not_silence_another_runs_stall(emulated):
    emulator, deployment = emulated("happy")
    stack = deployment.stack
    group, alarm = stack.resources["TrainingJobLogGroup"], stack.resources["StalledRunAlarm"]
    start = (int(CLOCK.now().timestamp()) // 60 + 2) * 60  # a whole minute, after the alarm
    forger, stalling = _submit(emulator, stack, "forger"), _submit(emulator, stack, "stalls")
    for stream, node in zip(stalling, NODES, strict=True):
        _write(emulator, group, stream, _heartbeats("stalls", node, start, STOPS_AT))
    for stream, node in zip(forger, NODES, strict=True):
        _write(emulator, group, stream, _heartbeats("forger", node, start))
    # The forger's command prints on its main node, which the driver sends to its stream.
    _write(emulator, group, forger[0], _forged(start, "stalls"))

    end = datetime.fromtimestamp(start, UTC) + timedelta(minutes=MINUTES + 1)
    while CLOCK.now() < end:
        time.sleep(0.01)
    cloudwatch = emulator.client("cloudwatch")
    changes = cloudwatch.describe_alarm_history(
        AlarmName=alarm, HistoryItemType="AlarmContributorStateUpdate",
        ScanBy="TimestampAscending", MaxRecords=100)["AlarmHistoryItems"]
    to_alarm = {item["AlarmContributorAttributes"]["run"]: item["Timestamp"]
                for item in changes if "to ALARM" in item["HistorySummary"]}
    # The stalling run is told, on its own, once its nodes' figure is over 900 s in two of
    # three minutes (its last step was at minute 9:30; 900 s later is minute 24:30), whatever
    # the forger printed: the forged zeros under its name lower no maximum, and the forged run
    # held in ALARM since the start takes no other run's change of state.
    told = to_alarm["stalls"] - datetime.fromtimestamp(start, UTC)
    assert timedelta(minutes=25) <= told <= timedelta(minutes=27), told
    # What a job can do: raise an alarm for a run name it makes up (or another run's); the
    # forger's own run, which steps, is never in ALARM.
    assert set(to_alarm) == {"stalls", "no-such-run"}
    assert to_alarm["no-such-run"] - datetime.fromtimestamp(start, UTC) <= timedelta(minutes=2)
