"""The curves the trainer leaves while it trains: each node's JSON Lines and TensorBoard event
files among the outputs, read back as TensorBoard reads them."""

from __future__ import annotations

import json

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.trainer.conftest import run_trainer
from traingrid_node.series import FIELDS, REQUIRED

TINY = ["--image_size", "32", "-b", "2", "--log_every", "1", "--loader_workers", "0",
        "--warmup_epochs", "0"]


def test_a_cpu_run_writes_its_curves_as_json_lines_and_tensorboard_events(tmp_path) -> None:
    output = tmp_path / "run"
    result = run_trainer(["--synthetic", "--num_epochs", "2", "--steps_per_epoch", "3", *TINY,
                          "--output_dir", str(output)])
    assert result.returncode == 0, result.stderr

    lines = (output / "metrics" / "node-0.jsonl").read_text().splitlines()
    points = [json.loads(line) for line in lines]
    assert [p["step"] for p in points] == [1, 2, 3, 4, 5, 6]
    assert [round(p["epoch"], 3) for p in points] == [0.333, 0.667, 1.0, 1.333, 1.667, 2.0]
    for p in points:
        assert set(REQUIRED) <= set(p) <= set(FIELDS)
        assert p["loss"] > 0 and p["lr"] > 0 and p["images_per_s"] > 0
        assert p["step_s"] > 0 and 0 <= p["input_s"] <= p["step_s"]
        assert "gpu_util" not in p  # no GPU here
    assert points[0]["t"] <= points[-1]["t"]

    events = list((output / "tensorboard" / "node-0").glob("events.out.tfevents.*"))
    assert len(events) == 1
    board = EventAccumulator(str(events[0].parent))
    board.Reload()
    tags = board.Tags()["scalars"]
    assert {"train/loss", "train/lr", "train/images_per_s", "train/step_s",
            "train/input_s"} <= set(tags)
    loss = board.Scalars("train/loss")
    assert [e.step for e in loss] == [1, 2, 3, 4, 5, 6]
    assert [round(e.value, 4) for e in loss] == [round(p["loss"], 4) for p in points]
    assert [e.wall_time for e in loss] == [p["t"] for p in points]


def test_curves_reach_s3_when_training_ends(tmp_path) -> None:
    output, calls = tmp_path / "run", tmp_path / "lfs-calls"
    lfs = tmp_path / "lfs"
    lfs.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
    lfs.chmod(0o755)
    result = run_trainer(["--synthetic", "--num_epochs", "1", "--steps_per_epoch", "1", *TINY,
                          "--output_dir", str(output)],
                         TRAINGRID_EXPORT_DIR=str(output), TRAINGRID_LFS=str(lfs))
    assert result.returncode == 0, result.stderr
    archived = calls.read_text().splitlines()[-1].split()
    events = next((output / "tensorboard" / "node-0").glob("events.out.tfevents.*"))
    assert archived == ["hsm_archive", str(output / "metrics" / "node-0.jsonl"), str(events)]


def test_a_node_is_recorded_by_its_first_rank_only(tmp_path) -> None:
    output = tmp_path / "run"
    result = run_trainer(["--synthetic", "--num_epochs", "1", "--steps_per_epoch", "2", *TINY,
                          "--output_dir", str(output)],
                         OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="1",
                         OMPI_COMM_WORLD_LOCAL_RANK="0", OMPI_COMM_WORLD_LOCAL_SIZE="1")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (output / "metrics").iterdir()) == ["node-0.jsonl"]
