"""The training containers' /dev/shm: sized in the template for the trainer's data loaders,
and a run whose loaders need more is refused before anything is created."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from traingrid.errors import RequestInvalid
from traingrid.settings import Settings
from traingrid.training.run_request import TrainingRunRequest, require_runnable_here
from traingrid.vocabulary import catalog
from traingrid.vocabulary.catalog import INSTANCE_TYPES, loader_shared_memory_mib
from traingrid_local.templates import load_template

ROOT = Path(__file__).resolve().parents[2]
DATASET = "s3://data/imagenet/"


def test_the_loaders_need_ranks_times_workers_times_prefetched_batches() -> None:
    # 256 × 3 × 224 × 224 float32 = 147 MiB a batch; 8 ranks × 4 workers × 2 batches.
    assert loader_shared_memory_mib(8, 256) == 8 * 4 * 2 * 147 == 9408
    assert loader_shared_memory_mib(1, 65) == 299  # 8 × 37.33 MiB, rounded up


def test_the_formula_counts_the_trainers_own_loader_workers() -> None:
    config = (ROOT / "containers/mnp/traingrid_trainer/config.py").read_text()
    workers = re.search(r'"--loader_workers".*?default=(\d+)', config, re.S)
    size = re.search(r'"--image_size".*?default=(\d+)', config, re.S)
    assert workers and int(workers.group(1)) == catalog.LOADER_WORKERS
    assert size and int(size.group(1)) == catalog.IMAGE_SIZE


def test_the_default_shared_memory_holds_the_default_run_on_every_default_type() -> None:
    template = load_template()
    parameter = template["Parameters"]["NodeSharedMemoryMiB"]
    container = (template["Resources"]["TrainingJobDefinition"]["Properties"]["NodeProperties"]
                 ["NodeRangeProperties"][0]["Container"])
    assert container["LinuxParameters"]["SharedMemorySize"] == {"Ref": "NodeSharedMemoryMiB"}
    assert parameter["Type"] == "Number"
    defaults = TrainingRunRequest(dataset=DATASET)
    for name in template["Parameters"]["TrainingInstanceTypes"]["Default"].split(","):
        needed = loader_shared_memory_mib(INSTANCE_TYPES[name].gpus, defaults.batch_size)
        assert needed * 1.25 <= parameter["Default"], name
    # Every function that validates requests reads it.
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["NODE_SHARED_MEMORY_MIB"] == {"Ref": "NodeSharedMemoryMiB"}


def test_a_batch_the_loaders_cannot_hold_is_refused_with_every_other_problem() -> None:
    request = TrainingRunRequest(dataset=DATASET, batch_size=512, instance_type="p4d.24xlarge")

    with pytest.raises(RequestInvalid) as refused:
        require_runnable_here(request, "data", ["p3.16xlarge"], 12288)

    problems = {p["pointer"]: p["message"] for p in refused.value.problems}
    assert set(problems) == {"/instance_type", "/batch_size"}
    assert "18816 MiB" in problems["/batch_size"] and "12288 MiB" in problems["/batch_size"]


def test_what_fits_and_other_commands_pass() -> None:
    fits = TrainingRunRequest(dataset=DATASET, batch_size=256)
    require_runnable_here(fits, "data", None, 12288)
    own_command = TrainingRunRequest(dataset=DATASET, batch_size=4096,
                                     command=["python3", "my_train.py"])
    require_runnable_here(own_command, "data", None, 12288)
    with pytest.raises(RequestInvalid):
        require_runnable_here(fits, "data", None, 64)  # Docker's own /dev/shm
    require_runnable_here(fits, "data", None, None)  # not told: not checked


def test_the_functions_read_the_stacks_shared_memory() -> None:
    settings = Settings.from_env({"DATA_BUCKET": "data", "NODE_SHARED_MEMORY_MIB": "12288"})
    assert settings.node_shared_memory_mib == 12288
    assert Settings.from_env({"DATA_BUCKET": "data"}).node_shared_memory_mib is None


def test_the_api_answers_400_for_a_batch_its_stack_cannot_hold() -> None:
    """The API validates with the same rule, from its own environment as the template sets
    it (RequestInvalid is the API's 400)."""
    from datetime import UTC, datetime

    from traingrid.runs.submit import training_submission
    from traingrid.settings import ApiSettings
    from traingrid_local.emulator.deploy import stand_in_environment

    settings = ApiSettings.from_env(stand_in_environment() | {
        "DATA_BUCKET": "data", "TRAINING_INSTANCE_TYPES": "p4d.24xlarge,p5.48xlarge"})
    assert settings.node_shared_memory_mib == 12288
    body = {"dataset": f"s3://{settings.data_bucket}/imagenet/", "batch_size": 1024}
    with pytest.raises(RequestInvalid) as refused:
        training_submission(body, settings, datetime(2026, 11, 25, tzinfo=UTC))
    assert [p["pointer"] for p in refused.value.problems] == ["/batch_size"]
