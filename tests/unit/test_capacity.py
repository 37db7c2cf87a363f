"""A queued job's capacity, diagnosed from what AWS reports (no AWS: its messages, verbatim)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from traingrid.training import attempts
from traingrid.training.capacity import capacity_code, diagnose

CREATED = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
JOB = {"jobId": "job-1", "status": "RUNNABLE", "createdAt": int(CREATED.timestamp() * 1000)}
CE = {"computeEnvironmentName": "TrainingComputeEnvironment-Ab12",
      "computeEnvironmentArn": "arn:aws:batch:us-east-1:1:compute-environment/"
                               "TrainingComputeEnvironment-Ab12",
      "status": "VALID", "state": "ENABLED"}
GROUP = "TrainingComputeEnvironment-Ab12-asg-6c0e5f1c-2d3b-3b64-a8a4-52b1c9a1c3b0"
# EC2's messages as Auto Scaling records them in a failed activity's StatusMessage.
NO_P3 = ("Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do "
         "not have sufficient p3.16xlarge capacity in the Availability Zone you requested "
         "(us-east-1a). Our system will be working on provisioning additional capacity. You can "
         "currently get p3.16xlarge capacity by not specifying an Availability Zone in your "
         "request or choosing us-east-1b, us-east-1c. Launching EC2 instance failed.")
VCPU_LIMIT = ("Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more "
              "vCPU capacity than your current vCPU limit of 512 allows for the instance bucket "
              "that the specified instance type belongs to. Please visit "
              "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this "
              "limit. Launching EC2 instance failed.")


def activity(message: str, *, status: str = "Failed", group: str = GROUP,
             after: timedelta = timedelta(minutes=1)) -> dict:
    return {"AutoScalingGroupName": group, "StatusCode": status, "StatusMessage": message,
            "StartTime": CREATED + after, "Description": "Launching a new EC2 instance."}


@pytest.mark.parametrize(("message", "code"), [
    (NO_P3, "InsufficientInstanceCapacity"),
    (VCPU_LIMIT, "VcpuLimitExceeded"),
    # The message alone, as EC2 returns it to RunInstances.
    ("We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you "
     "requested (us-west-2b).", "InsufficientInstanceCapacity"),
    ("You have requested more vCPU capacity than your current vCPU limit of 0 allows for the "
     "instance bucket that the specified instance type belongs to.", "VcpuLimitExceeded"),
    ("Could not launch On-Demand Instances. InvalidParameterValue - Invalid launch template",
     None),
])
def test_ec2s_capacity_errors_are_recognised_by_code_or_words(message, code):
    assert capacity_code(message) == code


def test_a_failed_launch_for_want_of_capacity_is_a_diagnosis_naming_awss_message():
    shortage = diagnose(JOB, [CE], [activity(NO_P3)])
    assert shortage is not None
    assert shortage.code == "InsufficientInstanceCapacity"
    assert shortage.source == f"scaling activity of Auto Scaling group {GROUP}"
    assert "sufficient p3.16xlarge capacity" in shortage.message


def test_a_vcpu_quota_is_a_diagnosis_too():
    shortage = diagnose(JOB, [CE], [activity("Launching...", status="InProgress"),
                                    activity(VCPU_LIMIT)])
    assert shortage is not None and shortage.code == "VcpuLimitExceeded"


@pytest.mark.parametrize("activities", [
    [],  # the group has not acted yet
    [activity("Launching a new EC2 instance: i-0abc", status="Successful")],  # scaling normally
    [activity(NO_P3, status="InProgress")],
    [activity(NO_P3, after=-timedelta(minutes=5))],  # another job's, before this one queued
    [activity(NO_P3, group="OtherEnvironment-asg-1")],  # another compute environment's group
    [activity("Could not launch On-Demand Instances. InvalidParameterValue - bad template")],
])
def test_a_job_waiting_for_another_reason_is_not_cut_short(activities):
    assert diagnose(JOB, [CE], activities) is None


def test_an_invalid_compute_environment_and_batchs_own_reason_are_diagnoses():
    invalid = {**CE, "status": "INVALID",
               "statusReason": "CLIENT_ERROR - The specified launch template does not exist"}
    shortage = diagnose(JOB, [invalid], [])
    assert shortage is not None and shortage.code == "ComputeEnvironmentInvalid"
    assert "launch template does not exist" in shortage.message
    blocked = {**JOB, "statusReason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - There is no "
                                      "Spot capacity available that meets the job requirements."}
    shortage = diagnose(blocked, [CE], [])
    assert shortage is not None and shortage.code == "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"


def test_the_attempt_records_awss_code_and_the_run_shrinks():
    plan = {"nodes": 20, "min_nodes": 4, "max_attempts": 3, "gpus_per_node": 8,
            "environment": {}, "attempts": [attempts.first_attempt(20)]}
    job = {"id": "job-1", "error": "TrainingJobStuck", "waiting_s": 150,
           "capacity_code": "InsufficientInstanceCapacity"}
    following = attempts.next_attempt(plan, job, None)
    assert following["resubmit"] and following["nodes"] == 10
    assert following["attempts"][1]["reason"] == (
        "no capacity (InsufficientInstanceCapacity): waited 2 min in the queue on 20 nodes; "
        "shrunk to 10")
