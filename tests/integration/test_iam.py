"""Every statement of every role the stacks create can match what the account really has:
after a TrainingRun and a CampaignFanout, each Resource pattern matches an ARN and each
Condition the tags, trusted services or keys of a resource it covers."""

from __future__ import annotations

from tests.integration.conftest import finish
from tests.integration.iam import Statement, dead_statements
from traingrid_local.demo.runner import DEFAULT_KEY, SCENARIOS, manifest_body, upload_sample_dataset
from traingrid_local.stack import sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET


def test_every_role_statement_can_match_what_the_stack_has_or_makes(emulated):
    emulator, deployment = emulated("happy")
    upload_sample_dataset(emulator)
    s3 = emulator.client("s3")
    s3.put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY, Body=manifest_body(SCENARIOS["happy"], None))
    finish(emulator, deployment, "TrainingRunStateMachineArn")
    # Then a run whose archive S3 refuses, which makes what a happy run does not (an export
    # task; its file system is kept, tagged), and a campaign, which that fault leaves alone.
    emulator.set_faults(SCENARIOS["export-failed"].faults)
    s3.put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY,
                  Body=manifest_body(SCENARIOS["export-failed"], b'{"name": "archive-refused"}'))
    sample_campaign.seed(deployment)
    sample_campaign.upload_and_mark(emulator, deployment)
    fanout = finish(emulator, deployment, "CampaignFanoutStateMachineArn").execution
    assert fanout["status"] == "SUCCEEDED"
    runs = finish(emulator, deployment, "TrainingRunStateMachineArn").report["executions"]
    assert sorted((r["status"], r["error"] or "") for r in runs) == [
        ("FAILED", "ExportFailed"), ("SUCCEEDED", "")]

    # A stop scoped to executions of a guessed state machine name: CloudFormation names it
    # `<LogicalId>-<random>`, so the jobs' tags never match.
    guessed = Statement("StopRegionJob", "guessed", 0, {
        "Effect": "Allow", "Action": "sagemaker:StopTrainingJob",
        "Resource": "arn:aws:sagemaker:*:*:training-job/*",
        "Condition": {"StringLike": {"aws:ResourceTag/traingrid:execution": (
            f"arn:aws:states:*:*:execution:{deployment.stack.name}"
            "-CampaignFanoutStateMachine-*:*")}}})

    problems = dead_statements(emulator, deployment, extra=[guessed])

    (flagged,) = [p for p in problems if p.startswith("StopRegionJob (guessed)")]
    assert "aws:ResourceTag/traingrid:execution" in flagged
    assert ":execution:CampaignFanoutStateMachine-" in flagged  # what the jobs carry
    real = [p for p in problems if p != flagged]
    assert not real, "\n".join(real)
