"""The trainer's options: command-line flags, each defaulting to the job's environment."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from traingrid_node.metrics import CHECKPOINT_DIR
from traingrid_trainer.schedule import DECAY_MODES

IMAGENET_TRAIN_IMAGES = 1_281_167


@dataclass(frozen=True)
class TrainConfig:
    data_dir: Path
    output_dir: Path
    epochs: int
    batch_size: int  # images per rank and step
    warmup_epochs: int
    lr_decay_mode: str
    base_lr: float
    momentum: float
    weight_decay: float
    label_smoothing: float
    image_size: int
    synthetic: bool
    steps_per_epoch: int | None  # None: the dataset's size over the global batch
    train_images: int
    log_every: int
    loader_workers: int
    fail_rank: int | None
    checkpoint_dir: Path


# SageMaker (script mode) says where things are in its own variables: the train channel's
# files, the folder it uploads as model.tar.gz, and the folder it keeps in step with the job's
# CheckpointConfig in S3 (so a managed spot job that is interrupted resumes from it).
SAGEMAKER_CHECKPOINTS = "/opt/ml/checkpoints"


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
    p.add_argument("--warmup_epochs", "--warmup-epochs", type=_non_negative,
                   default=int(env.get("WARMUP_EPOCHS", "10")))
    p.add_argument("--lr_decay_mode", "--lr-decay-mode", choices=DECAY_MODES,
                   default=env.get("LR_DECAY_MODE", "poly"))
    p.add_argument("--lr", type=float, default=0.1, help="for a global batch of 256")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", "--weight-decay", type=float, default=1e-4)
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
    p.add_argument("--fail_rank", "--fail-rank", type=_non_negative, default=None,
                   help="fault injection: this rank exits 3 after the all-reduce check")
    p.add_argument("--clear_log", "--clear-log", action="store_true",
                   help="accepted for the reference command line; no effect")
    return p


def parse_args(argv: Sequence[str], env: Mapping[str, str] | None = None) -> TrainConfig:
    env = os.environ if env is None else env
    p = parser(env)
    args = p.parse_args(list(argv))
    if args.warmup_epochs >= args.num_epochs:
        p.error(f"--warmup_epochs ({args.warmup_epochs}) must be fewer than --num_epochs "
                f"({args.num_epochs})")
    steps = args.steps_per_epoch or (100 if args.synthetic else None)
    checkpoints = args.checkpoint_dir or (
        Path(SAGEMAKER_CHECKPOINTS) if in_sagemaker(env) else args.output_dir / CHECKPOINT_DIR)
    return TrainConfig(
        data_dir=args.data_dir, output_dir=args.output_dir, epochs=args.num_epochs,
        batch_size=args.batch_size, warmup_epochs=args.warmup_epochs,
        lr_decay_mode=args.lr_decay_mode, base_lr=args.lr, momentum=args.momentum,
        weight_decay=args.weight_decay, label_smoothing=args.label_smoothing,
        image_size=args.image_size, synthetic=args.synthetic, steps_per_epoch=steps,
        train_images=args.train_images, log_every=args.log_every,
        loader_workers=args.loader_workers, fail_rank=args.fail_rank,
        checkpoint_dir=checkpoints)
