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
