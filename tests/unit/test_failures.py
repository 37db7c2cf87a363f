"""The Fail state's error and cause, for every way a run can end badly."""

from __future__ import annotations

import json

from traingrid.training.failures import explain


def lambda_failure(error: str, message: str) -> dict:
    return {"Error": error, "Cause": json.dumps({"errorType": error, "errorMessage": message})}


def test_lambda_error_message_is_unwrapped():
    explained = explain({"failure": lambda_failure("DatasetNotFound", "No objects under s3://b/")})
    assert explained == {"error": "DatasetNotFound", "cause": "No objects under s3://b/."}


def test_states_errors_are_renamed_for_the_fail_state():
    explained = explain({"failure": {"Error": "States.Runtime", "Cause": "bad path"}})
    assert explained["error"] == "Workflow.Runtime"


def test_training_failure_with_archive_and_release():
    explained = explain({
        "job": {"id": "j", "error": "TrainingJobFailed", "cause": "main node exited 1"},
        "file_system": {"id": "fs-1"}, "released": {"lifecycle": "DELETING"},
        "archive": {"manifest": "s3://b/runs/r/manifest.json", "objects": 1, "bytes": 9},
    })
    assert explained["error"] == "TrainingJobFailed"
    assert "main node exited 1." in explained["cause"]
    assert "fs-1 was deleted" in explained["cause"]
    assert "s3://b/runs/r/manifest.json (1 object)" in explained["cause"]


def test_archive_failure_keeps_the_file_system_and_says_where():
    explained = explain({
        "job": {"id": "j", "error": None},
        "file_system": {"id": "fs-1"},
        "archive_failure": lambda_failure("ExportFailed", "Archive export t FAILED"),
        "retained": {"file_system_id": "fs-1", "expires_at": "2026-11-28T00:00:00Z",
                     "where": "the outputs are on fs-1 under /runs/r"},
    })
    assert explained["error"] == "ExportFailed"
    assert "kept until 2026-11-28T00:00:00Z" in explained["cause"]
    assert "/runs/r" in explained["cause"]
    assert "deleted." not in explained["cause"]
    assert explained["cause"].count("Archive export t FAILED") == 1


def test_undeleted_file_system_says_how_to_delete_it():
    explained = explain({"file_system": {"id": "fs-9"},
                         "release_failure": {"Error": "FSx.FSxException", "Cause": "boom"}})
    assert explained["error"] == "FileSystemNotDeleted"
    assert "aws fsx delete-file-system --file-system-id fs-9" in explained["cause"]


def test_throttling_beyond_the_retries_says_which_service_and_what_to_do():
    explained = explain({"failure": {"Error": "FSx.ThrottlingException",
                                     "Cause": "Rate exceeded (Service: FSx, Status Code: 400)"},
                         "file_system": {"id": "fs-1"}, "released": {"lifecycle": "DELETING"}})
    assert explained["error"] == "FSx.ThrottlingException"
    cause = explained["cause"]
    assert cause.startswith("Rate exceeded (Service: FSx")
    assert "throttled the FSx calls" in cause and "higher FSx request quota" in cause
    assert cause.index("What to do") < cause.index("fs-1 was deleted")


def test_a_timed_out_step_says_to_try_again_and_where_the_limit_is():
    explained = explain({"failure": lambda_failure(
        "Sandbox.Timedout", "Task timed out after 60.00 seconds")})
    assert "time limit" in explained["cause"] and "Timeout in template.yaml" in explained["cause"]


def test_a_service_refusal_names_the_service_and_a_runtime_error_is_a_defect():
    refused = explain({"failure": {"Error": "Batch.ClientException", "Cause": "no such queue"}})
    defect = explain({"failure": {"Error": "States.Runtime", "Cause": "bad path"}})
    assert "Batch refused a call" in refused["cause"]
    assert "TrainGrid defect" in defect["cause"]


def test_traingrid_errors_carry_their_own_advice():
    explained = explain({"failure": lambda_failure("DatasetNotFound", "Upload it first")})
    assert "What to do" not in explained["cause"]
