"""What a request chooses about how its job starts, through the deployed stack: the launcher
reaches every node's environment, and a batch the containers' /dev/shm cannot hold is refused
before anything is created."""

from __future__ import annotations

import pytest
from moto.batch.models import batch_backends

pytestmark = pytest.mark.e2e


def test_torchrun_reaches_every_nodes_environment_with_its_elastic_range(run_scenario):
    outcome = run_scenario("happy", manifest={"launcher": "torchrun", "nodes": 4,
                                              "min_nodes": 2})
    assert outcome.execution["status"] == "SUCCEEDED"
    job_id = outcome.execution["output"]["job_id"]
    simulated = batch_backends["123456789012"]["us-east-1"].get_job_by_id(job_id).simulated
    assert simulated.environment["TRAINGRID_LAUNCHER"] == "torchrun"
    assert simulated.environment["TRAINGRID_MIN_NODES"] == "2"


def test_a_batch_the_containers_shared_memory_cannot_hold_starts_nothing(run_scenario):
    # 8 ranks × 4 workers × 2 batches of 1024 images: 37,632 MiB; the stack gives 12,288.
    outcome = run_scenario("happy", manifest={"batch_size": 1024})
    assert outcome.report["executions"] == []
    (rejected,) = outcome.report["rejected_manifests"]
    problems = {p["pointer"]: p["message"] for p in rejected["problems"]}
    assert "37632 MiB" in problems["/batch_size"]
    assert "12288 MiB (NodeSharedMemoryMiB)" in problems["/batch_size"]
