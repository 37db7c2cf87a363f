"""The traingrid CLI through typer's runner, on the emulator."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from traingrid_local.cli.main import app
from traingrid_local.emulator import batch

runner = CliRunner()


@pytest.fixture(autouse=True)
def short_training_in_a_scratch_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(batch, "TRAINING_SECONDS", 3600)
    monkeypatch.chdir(tmp_path)  # the demo keeps its campaign database in .traingrid/


def test_demo_json_reports_a_failed_job_with_its_cause_and_nothing_leaked():
    result = runner.invoke(app, ["demo", "--scenario", "batch-job-failed", "--json",
                                 "--speed", "4000", "--training-hours", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (execution,) = report["executions"]
    assert execution["status"] == "FAILED"
    assert execution["state_machine"] == "TrainingRun"
    assert "exited with code 1" in execution["cause"]
    assert execution["state_transitions"] > 0 and execution["history_events"] > 0
    # The failed job's 20 minutes are on its receipt, whose parts add up to its total.
    actual = execution["cost"]["actual"]
    assert actual["compute"] > 0 and actual["file_system"] > 0
    assert round(sum(actual[part] for part in ("compute", "file_system", "orchestration",
                                                "staging")), 6) == actual["total"]
    # The run recorded the same receipt; none of its node-hours trained to the end.
    assert execution["cost"]["recorded_total"] == actual["total"]
    good = execution["cost"]["goodput"]
    assert good["goodput"] == 0 and good["lost_node_hours"]["lost_work"] > 0
    assert report["leaked_resources"] == []
    assert report["ok"] is True


def test_demo_prints_a_readable_report(tmp_path):
    manifest = tmp_path / "run.json"
    manifest.write_text(json.dumps({"nodes": 2, "instance_type": "p4d.24xlarge"}))
    result = runner.invoke(app, ["demo", "--manifest", str(manifest), "--key",
                                 "imagenet2012/resized/manifest.json", "--uploads", "2",
                                 "--speed", "4000", "--training-hours", "1"])
    assert result.exit_code == 0, result.output
    assert "SUCCEEDED" in result.stdout
    assert "Leaked resources: none" in result.stdout
    assert "model/final.pt" in result.stdout
    assert "cost" in result.stdout and "$" in result.stdout
    # The events its runs published on EventBridge: each run's start and end.
    listed = result.stdout.split("Run-status events on EventBridge")[1]
    assert re.search(r"TrainingRun (\S+) RUNNING\n.*TrainingRun \1 SUCCEEDED", listed, re.DOTALL)
    assert re.search(r"CampaignFanout (\S+) RUNNING\n.*CampaignFanout \1 SUCCEEDED", listed,
                     re.DOTALL)


def test_demo_with_a_rejected_manifest_exits_non_zero_with_the_reason(tmp_path):
    manifest = tmp_path / "bad.json"
    manifest.write_text(json.dumps({"nodes": 0}))
    result = runner.invoke(app, ["demo", "--manifest", str(manifest), "--speed", "4000"])
    assert result.exit_code == 1
    assert "/nodes" in result.stdout
    assert "the manifest was rejected; nothing started" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--scenario", "meteor-strike"], "unknown scenario 'meteor-strike'"),
    (["--pipeline", "nightly"], "unknown pipeline 'nightly'"),
    (["--pipeline", "campaign", "--scenario", "export-failed"], "does not apply to the campaign"),
    (["--uploads", "0"], "--uploads must be at least 1"),
    (["--manifest", "/nonexistent.json"], "does not exist"),
])
def test_bad_arguments_get_a_clear_error(args, message):
    result = runner.invoke(app, ["demo", *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_scenarios_lists_every_fault():
    result = runner.invoke(app, ["scenarios"])
    assert result.exit_code == 0
    for name in ("happy", "fsx-create-failed", "batch-job-failed", "stuck-runnable",
                 "export-failed", "throttling"):
        assert name in result.stdout


def test_serve_refuses_unknown_faults_and_bad_options_all_at_once():
    result = runner.invoke(app, ["serve", "--fault", "no-such-fault", "--fault",
                                      "node-lost", "--port", "70000"])
    assert result.exit_code == 2
    assert "--port 70000 is not a TCP port" in result.output
    assert "--fault 'no-such-fault' is not a fault; there are fsx-create-failed" in result.output
    assert "node-lost'" not in result.output


def test_demo_on_the_eks_backend_resumes_a_lost_node_and_says_where_it_ran():
    result = runner.invoke(app, ["demo", "--backend", "eks", "--scenario", "node-lost",
                                 "--speed", "4000", "--training-hours", "1"])
    assert result.exit_code == 0, result.output
    assert "Batch on EKS" in result.stdout
    assert "SUCCEEDED" in result.stdout and "as expected" in result.stdout
    assert "Leaked resources: none" in result.stdout
