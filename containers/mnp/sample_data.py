"""Small ImageNet-like TFRecord shards of real JPEGs, for the trainer's tests and
``make mpi-smoke``: the same records the trainer reads from the file system on AWS."""

from __future__ import annotations

import io
from pathlib import Path

from traingrid_trainer import tfrecord


def write_shards(data_dir: Path, pattern: str, shards: int, per_shard: int,
                 size: tuple[int, int] = (48, 40)) -> list[Path]:
    """``shards`` files named by ``pattern`` (``train-{:05d}-of-{:05d}``), each holding
    ``per_shard`` JPEG examples with labels 1 to 5 (the TFRecords count classes from 1)."""
    from PIL import Image  # the trainer's image library

    data_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for shard in range(shards):
        records = []
        for i in range(per_shard):
            buffer = io.BytesIO()
            Image.new("RGB", size, (i * 40 % 256, 90, (shard * 50) % 256)).save(buffer, "JPEG")
            records.append(tfrecord.encode_example({"image/encoded": [buffer.getvalue()],
                                                    "image/class/label": [1 + i % 5]}))
        path = data_dir / pattern.format(shard, shards)
        tfrecord.write_records(path, records)
        written.append(path)
    return written


# ImageNet's training JPEGs are mostly Flickr's 500-pixel "medium" size (500×375, 500×333,
# portrait and square ones), ~110 KB on average: sizes drawn from these, weighted.
IMAGENET_SIZES = ((500, 375), (500, 375), (500, 375), (375, 500), (500, 333), (500, 333),
                  (333, 500), (500, 400), (500, 500), (640, 480))


def natural_jpeg(width: int, height: int, seed: int, quality: int = 90) -> bytes:
    """A photo-like JPEG: per-channel noise with a 1/f spectrum (as natural images have) plus
    fine grain, which libjpeg compresses about as well as a photograph (~120 KB at 500×375)."""
    import numpy
    from PIL import Image

    rng = numpy.random.default_rng(seed)
    fy, fx = numpy.fft.fftfreq(height)[:, None], numpy.fft.rfftfreq(width)[None, :]
    frequency = numpy.hypot(fx, fy)
    frequency[0, 0] = 1.0
    channels = []
    for _ in range(3):
        spectrum = (rng.standard_normal(frequency.shape)
                    + 1j * rng.standard_normal(frequency.shape)) / frequency
        channel = numpy.fft.irfft2(spectrum, s=(height, width))
        channels.append((channel - channel.mean()) / channel.std() * 50 + 128)
    pixels = numpy.stack(channels, -1) + rng.standard_normal((height, width, 3)) * 8
    buffer = io.BytesIO()
    Image.fromarray(numpy.clip(pixels, 0, 255).astype(numpy.uint8)).save(
        buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def write_imagenet_like_shards(data_dir: Path, shards: int, per_shard: int,
                               classes: int = 1000) -> list[Path]:
    """Training shards of photo-like JPEGs at ImageNet's sizes and file sizes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for shard in range(shards):
        records = []
        for i in range(per_shard):
            seed = shard * per_shard + i
            width, height = IMAGENET_SIZES[seed % len(IMAGENET_SIZES)]
            records.append(tfrecord.encode_example({
                "image/encoded": [natural_jpeg(width, height, seed)],
                "image/class/label": [1 + seed % classes]}))
        path = data_dir / f"train-{shard:05d}-of-{shards:05d}"
        tfrecord.write_records(path, records)
        written.append(path)
    return written
