"""The trainer's options: command-line flags, each defaulting to the job's environment."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from traingrid_node.metrics import CHECKPOINT_DIR
from traingrid_trainer.schedule import DECAY_MODES, LARS_ABOVE, OPTIMIZERS, TRUST_COEFFICIENT

# The input pipelines data.py offers (here so that the flags parse without PyTorch).
PIPELINES = ("auto", "cpu", "gpu", "legacy")

IMAGENET_TRAIN_IMAGES = 1_281_167


@dataclass(frozen=True)
class TrainConfig:
    data_dir: Path
    output_dir: Path
    epochs: int
    batch_size: int  # images per rank and step
    warmup_epochs: int | None  # None: the recipe's rule for the global batch (schedule.py)
    lr_decay_mode: str
    base_lr: float
    momentum: float
    weight_decay: float
    optimizer: str  # auto, sgd or lars
    lars_lr: float | None  # None: the recipe's for the global batch
    trust_coefficient: float
    label_smoothing: float
    image_size: int
    synthetic: bool
    steps_per_epoch: int | None  # None: the dataset's size over the global batch
    train_images: int
    log_every: int
    loader_workers: int
    fail_rank: int | None
    checkpoint_dir: Path
    input_pipeline: str = "auto"  # auto, cpu, gpu or legacy (data.py)
    benchmark_input: bool = False  # measure the input pipeline instead of training
    benchmark_seconds: float = 10.0
    preflight: bool = False  # measure every rank before training (preflight.py)
    hang_rank: int | None = None  # fault injection: this rank stops stepping (resilience.py)


# SageMaker (script mode) says where things are in its own variables: the train channel's
# files, the folder it uploads as model.tar.gz, and the folder it keeps in step with the job's
# CheckpointConfig in S3 (so a managed spot job that is interrupted resumes from it).
SAGEMAKER_CHECKPOINTS = "/opt/ml/checkpoints"
# The job's TensorBoardOutputConfig.LocalPath (SageMaker's default, which the campaign's
# CreateTrainingJob names): SageMaker uploads what is written there to its S3OutputPath while
# the job runs. SM_MODEL_DIR reaches S3 only in model.tar.gz, once the job has ended.
SAGEMAKER_TENSORBOARD = "/opt/ml/output/tensorboard"


def in_sagemaker(env: Mapping[str, str]) -> bool:
    return "SM_MODEL_DIR" in env


def default_paths(env: Mapping[str, str]) -> tuple[str, str]:
    """(data folder, output folder): the Batch job's JOB_DIR and OUTPUT_DIR, else SageMaker's
    train channel and model folder."""
    data = env.get("JOB_DIR") or env.get("SM_CHANNEL_TRAIN") or "/fsx"
    output = env.get("OUTPUT_DIR") or env.get("SM_MODEL_DIR") or "output"
    return data, output


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def _warmup(text: str) -> int | None:
    """Epochs, or ``auto`` (also an empty WARMUP_EPOCHS): the recipe's rule."""
    return None if text.strip() in ("", "auto") else _non_negative(text)


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m traingrid_trainer",
        description="Data-parallel ResNet-50 on ImageNet TFRecords (or synthetic images).")
    data, output = default_paths(env)
    p.add_argument("--data_dir", "--data-dir", type=Path, default=data,
                   help="the dataset's train-*/validation-* TFRecord shards (JOB_DIR, or "
                        "SageMaker's SM_CHANNEL_TRAIN)")
    p.add_argument("--output_dir", "--output-dir", type=Path, default=output,
                   help="metrics.json, the final weights and logs (OUTPUT_DIR, or SageMaker's "
                        "SM_MODEL_DIR)")
    p.add_argument("--checkpoint_dir", "--checkpoint-dir", type=Path, default=None,
                   help=f"epoch checkpoints; default: <output_dir>/{CHECKPOINT_DIR}, or "
                        f"{SAGEMAKER_CHECKPOINTS} on SageMaker")
    p.add_argument("--num_epochs", "--num-epochs", "--epochs", type=_positive,
                   default=int(env.get("EPOCHS", "90")))
    p.add_argument("-b", "--batch_size", "--batch-size", type=_positive,
                   default=int(env.get("BATCH_SIZE", "256")), help="images per GPU")
    p.add_argument("--warmup_epochs", "--warmup-epochs", type=_warmup,
                   default=env.get("WARMUP_EPOCHS") or "auto",
                   help="epochs, or auto: 0 up to 256 images a step, 5 below 32k, 25 from "
                        "32k, at most half the run")
    p.add_argument("--lr_decay_mode", "--lr-decay-mode", choices=DECAY_MODES,
                   default=env.get("LR_DECAY_MODE", "poly"))
    p.add_argument("--lr", type=float, default=0.1,
                   help="SGD's rate for a global batch of 256 (LARS: --lars_lr)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", "--weight-decay", type=float, default=1e-4,
                   help="on convolution and linear weights; never on BatchNorm or biases")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="auto",
                   help=f"auto: LARS above a global batch of {LARS_ABOVE:,}, else SGD")
    p.add_argument("--lars_lr", "--lars-lr", type=_positive_float, default=None,
                   help="LARS's peak rate; default: the MLPerf reference's for the global "
                        "batch (10, 25 from 16k, 31.2 from 32k)")
    p.add_argument("--lars_trust_coefficient", "--lars-trust-coefficient",
                   type=_positive_float, default=TRUST_COEFFICIENT)
    p.add_argument("--label_smoothing", "--label-smoothing", type=float, default=0.1)
    p.add_argument("--image_size", "--image-size", type=_positive, default=224)
    p.add_argument("--synthetic", action="store_true",
                   help="random images, no data: a connectivity and throughput test")
    p.add_argument("--steps_per_epoch", "--steps-per-epoch", type=_positive, default=None,
                   help="default: the dataset's images over the global batch (100 synthetic)")
    p.add_argument("--train_images", "--train-images", type=_positive,
                   default=IMAGENET_TRAIN_IMAGES)
    p.add_argument("--log_every", "--log-every", type=_positive, default=50,
                   help="log throughput every N steps")
    p.add_argument("--loader_workers", "--loader-workers", type=_non_negative, default=4)
    p.add_argument("--input_pipeline", "--input-pipeline", choices=PIPELINES, default="auto",
                   help="auto: decode on the GPU (nvJPEG) when there is one, else on the "
                        "CPU (Pillow); legacy: the first pipeline, for comparison")
    p.add_argument("--benchmark_input", "--benchmark-input", action="store_true",
                   help="run the input pipeline alone (one loader worker) for "
                        "--benchmark_seconds and print one JSON line of its images/s")
    p.add_argument("--benchmark_seconds", "--benchmark-seconds", type=_positive_float,
                   default=10.0)
    p.add_argument("--fail_rank", "--fail-rank", type=_non_negative, default=None,
                   help="fault injection: this rank exits 3 after the all-reduce check")
    p.add_argument("--hang_rank", "--hang-rank", type=_non_negative, default=None,
                   help="fault injection: this rank stops stepping after a few steps (the "
                        "watchdog ends the job, naming it)")
    p.add_argument("--preflight", action=argparse.BooleanOptionalAction,
                   default=bool(env.get("TRAINGRID_PREFLIGHT", "").strip()),
                   help="measure every rank (all-reduce, training rate, reads) before "
                        "training and exit 75 naming a node far below the others; on when "
                        "the job sets TRAINGRID_PREFLIGHT (its thresholds, JSON)")
    p.add_argument("--clear_log", "--clear-log", action="store_true",
                   help="accepted for the reference command line; no effect")
    return p


def parse_args(argv: Sequence[str], env: Mapping[str, str] | None = None) -> TrainConfig:
    env = os.environ if env is None else env
    p = parser(env)
    args = p.parse_args(list(argv))
    if args.warmup_epochs is not None and args.warmup_epochs >= args.num_epochs:
        p.error(f"--warmup_epochs ({args.warmup_epochs}) must be fewer than --num_epochs "
                f"({args.num_epochs})")
    steps = args.steps_per_epoch or (100 if args.synthetic else None)
    checkpoints = args.checkpoint_dir or (
        Path(SAGEMAKER_CHECKPOINTS) if in_sagemaker(env) else args.output_dir / CHECKPOINT_DIR)
    return TrainConfig(
        data_dir=args.data_dir, output_dir=args.output_dir, epochs=args.num_epochs,
        batch_size=args.batch_size, warmup_epochs=args.warmup_epochs,
        lr_decay_mode=args.lr_decay_mode, base_lr=args.lr, momentum=args.momentum,
        weight_decay=args.weight_decay, optimizer=args.optimizer, lars_lr=args.lars_lr,
        trust_coefficient=args.lars_trust_coefficient, label_smoothing=args.label_smoothing,
        image_size=args.image_size, synthetic=args.synthetic, steps_per_epoch=steps,
        train_images=args.train_images, log_every=args.log_every,
        loader_workers=args.loader_workers, fail_rank=args.fail_rank,
        input_pipeline=args.input_pipeline, benchmark_input=args.benchmark_input,
        benchmark_seconds=args.benchmark_seconds, preflight=args.preflight,
        hang_rank=args.hang_rank,
        checkpoint_dir=checkpoints)
