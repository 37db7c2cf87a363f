"""A TrainingRun whose file system FSx refuses for the account's storage quota ends with a
cause a person can act on: the quota, its code and the increase to request."""

from __future__ import annotations

import re

from tests.integration.conftest import finish
from traingrid_local.demo.runner import DEFAULT_KEY, SCENARIOS, manifest_body, upload_sample_dataset
from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.stack.environment import DEMO_BUCKET


def test_a_file_system_beyond_the_fsx_quota_fails_the_run_naming_the_increase(emulated):
    emulator, deployment = emulated("happy")
    # Another workload holds the account's scratch storage: not even 1,200 GiB is left.
    ACCOUNT.set_quota("fsx", "Lustre Scratch storage capacity", 1000)
    upload_sample_dataset(emulator)
    emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY,
                                     Body=manifest_body(SCENARIOS["happy"], None))

    outcome = finish(emulator, deployment, "TrainingRunStateMachineArn")

    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED",
                                                        "FSx.ServiceLimitExceededException")
    cause = execution["cause"]
    assert "Lustre Scratch storage capacity" in cause and "L-AD2FC696" in cause
    assert re.search(r"FSx refused the ([0-9,]+) GiB SCRATCH_2 file system", cause)
    capacity = re.search(r"FSx refused the ([0-9,]+) GiB", cause)[1].replace(",", "")
    assert ("aws service-quotas request-service-quota-increase --service-code fsx "
            f"--quota-code L-AD2FC696 --desired-value {capacity}") in cause
    assert "FsxStorageQuotaGiB" in cause
    assert outcome.report["leaked_resources"] == []
