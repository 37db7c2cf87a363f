"""The campaign jobs' SageMaker entry point: the same trainer, reading SageMaker's variables
and hyperparameter flags, under a real mpirun; and its log lines as SageMaker's metric
definitions read them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import torch

from tests.trainer.conftest import MNP, needs_mpirun, run_trainer, trainer_env
from tests.trainer.test_mpirun import LOCAL, mpirun
from traingrid_node.launch import build_mpirun_command
from traingrid_node.metrics import FINAL_MODEL, LOG_METRICS, METRICS_FILE
from traingrid_trainer import watch
from traingrid_trainer.config import SAGEMAKER_CHECKPOINTS, SAGEMAKER_TENSORBOARD, parse_args
from traingrid_trainer.world import detect_world

ENTRY_POINT = MNP.parent / "sagemaker" / "traingrid_train.py"
TINY = ["--image_size", "32", "--log_every", "1", "--loader_workers", "0", "--synthetic",
        "--steps_per_epoch", "2"]


def sagemaker_env(tmp_path: Path) -> dict[str, str]:
    return {"SM_MODEL_DIR": str(tmp_path / "model"), "SM_CHANNEL_TRAIN": str(tmp_path / "data"),
            "SM_HOSTS": '["algo-2", "algo-1"]', "SM_CURRENT_HOST": "algo-1"}


def test_on_sagemaker_the_trainer_reads_its_channel_model_and_checkpoint_folders(
        tmp_path: Path) -> None:
    cfg = parse_args(["--epochs", "3", "--warmup_epochs", "1"], sagemaker_env(tmp_path))
    assert (cfg.data_dir, cfg.output_dir) == (tmp_path / "data", tmp_path / "model")
    assert cfg.checkpoint_dir == Path(SAGEMAKER_CHECKPOINTS) and cfg.epochs == 3
    # The Batch job's own variables win; without either, the checkpoints sit with the outputs.
    batch = parse_args([], {"JOB_DIR": "/fsx", "OUTPUT_DIR": "/fsx/runs/r"})
    assert batch.checkpoint_dir == Path("/fsx/runs/r/checkpoints")
    assert detect_world({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "16",
                         "SM_HOSTS": '["algo-2", "algo-1"]'}).main_address == "algo-1"


def test_on_sagemaker_the_tensorboard_files_go_where_sagemaker_uploads_them(
        tmp_path: Path, monkeypatch) -> None:
    assert watch.tensorboard_dir(tmp_path / "model", sagemaker_env(tmp_path)) == Path(
        SAGEMAKER_TENSORBOARD)  # the job's TensorBoardOutputConfig.LocalPath
    assert watch.tensorboard_dir(tmp_path / "out", {}) == tmp_path / "out" / "tensorboard"
    local_path = tmp_path / "opt-ml-output-tensorboard"  # not the machine's /opt/ml
    monkeypatch.setattr(watch, "SAGEMAKER_TENSORBOARD", str(local_path))
    recorder = watch.Recorder(tmp_path / "model", detect_world({}), torch.device("cpu"), None,
                              env=sagemaker_env(tmp_path))
    recorder.window(step=1, epoch=0.5, loss=6.9, lr=0.1, steps=1, batch_size=2, seconds=0.1)
    recorder.close()
    assert list((local_path / "node-0").glob("events.out.tfevents.*"))
    assert not (tmp_path / "model" / "tensorboard").exists()


def metric_values(regex: str, output: str) -> list[float]:
    """What SageMaker takes from a job's output with ``regex``: a search of each line."""
    return [float(m.group(1)) for line in output.splitlines() if (m := re.search(regex, line))]


def test_the_log_lines_give_sagemaker_its_metrics(tmp_path: Path) -> None:
    result = run_trainer([*TINY, "--num_epochs", "1", "-b", "2", "--warmup_epochs", "0",
                          "--output_dir", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    for name, regex in LOG_METRICS.items():
        values = metric_values(regex, result.stdout)
        assert len(values) == 2 and all(v > 0 for v in values), name
        # As SageMaker's mpirun tags the first rank's lines (--tag-output).
        tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in result.stdout.splitlines())
        assert metric_values(regex, tagged) == values, name


def test_a_refused_flag_echoing_metric_words_is_no_metric(tmp_path: Path) -> None:
    """argparse's error names the value it refused: a hyperparameter's words are no loss."""
    words = "1 loss 9 lr 1 images/s 9 (9 per GPU)"
    result = run_trainer([*TINY, "--num_epochs", words, "--output_dir", str(tmp_path)])
    assert result.returncode == 2 and words in result.stderr, result.stderr
    for regex in LOG_METRICS.values():
        assert metric_values(regex, result.stdout + result.stderr) == []


@needs_mpirun
def test_sagemakers_mpirun_runs_the_entry_point_with_the_jobs_hyperparameters(
        tmp_path: Path) -> None:
    # As SageMaker's toolkit starts it: mpirun, the script, the hyperparameters as flags.
    hyperparameters = ["--num_epochs", "1", "--batch_size", "2", "--lr_decay_mode", "poly",
                       "--warmup_epochs", "0"]
    env = trainer_env(**sagemaker_env(tmp_path), MASTER_ADDR="127.0.0.1")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=2\n")
    command = build_mpirun_command(
        hostfile=hostfile, num_processes=2, interface="lo",
        forwarded=["PYTHONPATH", "SM_MODEL_DIR", "SM_CHANNEL_TRAIN", "SM_HOSTS", "MASTER_ADDR"],
        extra_mpi_params=LOCAL,
        train_command=[sys.executable, str(ENTRY_POINT), *hyperparameters, *TINY,
                       "--checkpoint_dir", str(tmp_path / "checkpoints")])

    result = mpirun(command, env)

    assert result.returncode == 0, result.stderr[-2000:]
    model = tmp_path / "model"
    document = json.loads((model / METRICS_FILE).read_text())
    assert (document["world_size"], document["epochs"]) == (2, 1)
    assert (model / FINAL_MODEL).is_file()
    assert (tmp_path / "checkpoints" / "epoch-0001.pt").is_file()
