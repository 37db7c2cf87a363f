"""The trainer as the job runs it: a process, its output directory, its exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from sample_data import write_shards

from tests.trainer.conftest import run_trainer
from traingrid_node.metrics import FINAL_MODEL, METRICS_FILE, problems
from traingrid_trainer import checkpoint
from traingrid_trainer.model import resnet50

TINY = ["--image_size", "32", "-b", "2", "--log_every", "1", "--loader_workers", "0",
        "--warmup_epochs", "0"]


def metrics(output: Path) -> dict:
    document = json.loads((output / METRICS_FILE).read_text())
    assert problems(document) == []
    return document


def test_resnet50_has_its_published_size() -> None:
    parameters = sum(p.numel() for p in resnet50().parameters())
    assert parameters == 25_557_032


def test_checkpoints_keep_the_newest_three_and_resume_from_the_newest(tmp_path) -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(1, 6):
        with torch.no_grad():
            model.weight.fill_(epoch)
        checkpoint.save(tmp_path, epoch, model, optimizer)
    (tmp_path / ".epoch-0006.pt.partial").write_bytes(b"cut short")
    assert sorted(p.name for p in tmp_path.glob("epoch-*.pt")) == [
        "epoch-0003.pt", "epoch-0004.pt", "epoch-0005.pt"]
    fresh = torch.nn.Linear(2, 2)
    resumed = checkpoint.resume(tmp_path, fresh, torch.optim.SGD(fresh.parameters(), lr=0.1))
    assert resumed is not None and resumed.epoch == 5
    assert torch.equal(fresh.weight, torch.full((2, 2), 5.0))
    assert checkpoint.resume(tmp_path / "none", fresh, optimizer) is None


def test_a_synthetic_run_writes_its_metrics_and_a_second_run_resumes(tmp_path) -> None:
    output = tmp_path / "run"
    first = run_trainer(["--synthetic", "--num_epochs", "1", "--steps_per_epoch", "2", *TINY,
                         "--output_dir", str(output)])
    assert first.returncode == 0, first.stderr
    document = metrics(output)
    assert document["world_size"] == 1 and document["device"] == "cpu"
    assert (document["epochs"], document["steps"], document["global_batch"]) == (1, 2, 2)
    assert document["images_per_second"] > 0 and document["allreduce_ok"] is True
    assert document["resumed_from"] is None and len(document["epoch_seconds"]) == 1
    assert "images/s" in first.stderr + first.stdout

    second = run_trainer(["--synthetic", "--num_epochs", "2", "--steps_per_epoch", "2", *TINY,
                          "--output_dir", str(output)])
    assert second.returncode == 0, second.stderr
    document = metrics(output)
    assert document["resumed_from"] == str(output / "checkpoints" / "epoch-0001.pt")
    assert (document["epochs"], document["steps"], len(document["epoch_seconds"])) == (2, 2, 1)
    assert (output / "checkpoints" / "epoch-0002.pt").is_file()
    assert (output / FINAL_MODEL).is_file()


def test_each_checkpoint_is_archived_to_s3_as_it_is_written(tmp_path) -> None:
    output, calls = tmp_path / "run", tmp_path / "lfs-calls"
    lfs = tmp_path / "lfs"
    lfs.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
    lfs.chmod(0o755)
    result = run_trainer(["--synthetic", "--num_epochs", "2", "--steps_per_epoch", "1", *TINY,
                          "--output_dir", str(output)],
                         TRAINGRID_EXPORT_DIR=str(output), TRAINGRID_LFS=str(lfs))
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines()[:2] == [
        f"hsm_archive {output / 'checkpoints' / f'epoch-000{n}.pt'}" for n in (1, 2)]


def test_a_failed_checkpoint_archive_does_not_stop_training(tmp_path) -> None:
    output = tmp_path / "run"
    result = run_trainer(["--synthetic", "--num_epochs", "1", "--steps_per_epoch", "1", *TINY,
                          "--output_dir", str(output)],
                         TRAINGRID_EXPORT_DIR=str(output), TRAINGRID_LFS="false")
    assert result.returncode == 0, result.stderr
    assert "could not archive epoch-0001.pt to S3 yet" in result.stdout
    assert (output / FINAL_MODEL).is_file()


def test_a_run_on_tfrecord_shards_trains_and_reports_its_accuracy(tmp_path) -> None:
    data_dir, output = tmp_path / "imagenet", tmp_path / "run"
    write_shards(data_dir, "train-{:05d}-of-{:05d}", shards=2, per_shard=4)
    write_shards(data_dir, "validation-{:05d}-of-{:05d}", shards=1, per_shard=3)
    result = run_trainer(["--num_epochs", "1", "--train_images", "8", *TINY,
                          "--output_dir", str(output)], JOB_DIR=str(data_dir))
    assert result.returncode == 0, result.stderr
    document = metrics(output)
    assert document["synthetic"] is False and document["steps"] == 4
    assert document["top1_accuracy"] is not None and 0 <= document["top1_accuracy"] <= 1


def test_no_data_is_exit_66_naming_the_directory(tmp_path) -> None:
    result = run_trainer(["--num_epochs", "1", *TINY, "--output_dir", str(tmp_path / "run")],
                         JOB_DIR=str(tmp_path / "empty"))
    assert result.returncode == 66
    assert f"no train-* TFRecord shards in {tmp_path / 'empty'}" in result.stderr + result.stdout


@pytest.mark.parametrize("bad", [["--lr_decay_mode", "exponential"], ["-b", "0"]])
def test_bad_flags_exit_2_before_training(tmp_path, bad: list[str]) -> None:
    result = run_trainer(["--synthetic", *bad, "--output_dir", str(tmp_path)])
    assert result.returncode == 2 and "error:" in result.stderr
    assert not (tmp_path / METRICS_FILE).exists()
