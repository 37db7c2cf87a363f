"""Batches for one rank: random images (``--synthetic``), or the ImageNet TFRecord shards
under the data directory, each rank reading its own share of the shards."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from traingrid_trainer import tfrecord
from traingrid_trainer.model import CLASSES

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
TRAIN_PATTERN, VALIDATION_PATTERN = "train-*", "validation-*"


class MissingData(FileNotFoundError):
    pass


def shards(data_dir: Path, pattern: str) -> list[Path]:
    return sorted(p for p in data_dir.glob(pattern) if p.is_file())


def synthetic_batches(batch_size: int, image_size: int, device: torch.device,
                      seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One random batch made once and fed forever: the network and the all-reduce, no I/O."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
    labels = torch.randint(0, CLASSES, (batch_size,), generator=generator)
    images, labels = images.to(device), labels.to(device)
    while True:
        yield images, labels


def decode(example: bytes, image_size: int, train: bool,
           rng: random.Random) -> tuple[torch.Tensor, int]:
    from PIL import Image  # the image decoder, needed only with real data

    features = tfrecord.parse_example(example)
    label = int(features["image/class/label"][0]) - 1  # the TFRecords count classes from 1
    encoded = features["image/encoded"][0]
    assert isinstance(encoded, bytes)
    with Image.open(io.BytesIO(encoded)) as opened:
        image = opened.convert("RGB")
    if train:  # a random crop of 35-100% of the area, then a random flip
        width, height = image.size
        scale = rng.uniform(0.35, 1.0) ** 0.5
        crop_w, crop_h = max(1, int(width * scale)), max(1, int(height * scale))
        left, top = rng.randint(0, width - crop_w), rng.randint(0, height - crop_h)
        image = image.crop((left, top, left + crop_w, top + crop_h))
        if rng.random() < 0.5:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
    pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    tensor = pixels.view(image_size, image_size, 3).permute(2, 0, 1).float() / 255
    return (tensor - MEAN) / STD, label


class ShardReader(IterableDataset[tuple[torch.Tensor, int]]):
    """This rank's shards (every ``world``-th), split again among the loader's workers."""

    def __init__(self, files: list[Path], rank: int, world: int, image_size: int,
                 train: bool, repeat: bool) -> None:
        self.files = files[rank::world] or files[rank % len(files)::len(files)]
        self.image_size, self.train, self.repeat, self.seed = image_size, train, repeat, rank

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        worker = get_worker_info()
        files = self.files if worker is None else self.files[worker.id::worker.num_workers]
        rng = random.Random(self.seed * 1000 + (worker.id if worker else 0))
        while True:
            order = list(files)
            if self.train:
                rng.shuffle(order)
            for path in order:
                for record in tfrecord.read_file(path):
                    yield decode(record, self.image_size, self.train, rng)
            if not self.repeat:
                return


def dataset_batches(data_dir: Path, rank: int, world: int, batch_size: int, image_size: int,
                    workers: int, train: bool = True) -> DataLoader[tuple[torch.Tensor, int]]:
    pattern = TRAIN_PATTERN if train else VALIDATION_PATTERN
    files = shards(data_dir, pattern)
    if not files:
        raise MissingData(f"no {pattern} TFRecord shards in {data_dir}")
    reader = ShardReader(files, rank, world, image_size, train, repeat=train)
    workers = min(workers, len(reader.files))
    return DataLoader(reader, batch_size=batch_size, num_workers=workers, drop_last=train,
                      persistent_workers=workers > 0)
