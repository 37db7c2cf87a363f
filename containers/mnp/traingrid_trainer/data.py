"""Batches for one rank: random images (``--synthetic``), or the ImageNet TFRecord shards
under the data directory, each rank reading its own share of the shards.

Three input pipelines (``--input_pipeline``), ``auto`` choosing ``gpu`` when this rank has a
CUDA device that torchvision's nvJPEG decoder works on, else ``cpu``:

- ``cpu``: the loader's workers pick each image's crop box from the JPEG's header, decode it
  (libjpeg-turbo through simplejpeg, straight into an array; Pillow when that is missing or
  the image is no plain JPEG) at the smallest DCT scale (1/8, 1/4, 1/2) that still gives the
  crop at least ``image_size`` pixels a side, crop and resize in one antialiased bilinear
  pass on uint8 pixels (PyTorch's vectorized kernel), and send uint8 batches, channels last
  (a quarter of float32's bytes, no transposing copy), through shared memory into pinned
  memory; the rank normalizes them on its device after a non-blocking copy.
- ``gpu``: the workers only read the records and pick the crop boxes; the rank decodes the
  JPEG bytes on its GPU (nvJPEG, ``torchvision.io.decode_jpeg``) and crops and resizes there.
- ``legacy``: the first pipeline (full-size Pillow decode, crop, resize, float32 normalized
  on the CPU), kept to measure against (``make bench-input``).

Every pipeline draws the same crop: 35-100% of the image's area at its aspect ratio, at a
random place, flipped half the time. Validation images are resized so their shorter side is
``image_size × 256/224`` and center-cropped to ``image_size`` (legacy: squeezed whole).
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from traingrid_trainer import tfrecord

try:  # libjpeg-turbo without Pillow's overhead: the header alone, then a decode into numpy
    import simplejpeg
except ImportError:  # Pillow does it all
    simplejpeg = None
from traingrid_trainer.config import PIPELINES
from traingrid_trainer.model import CLASSES

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
TRAIN_PATTERN, VALIDATION_PATTERN = "train-*", "validation-*"
DECODERS = {"cpu": "libjpeg-turbo" if simplejpeg else "pillow", "gpu": "nvjpeg",
            "legacy": "pillow-legacy"}
CENTER_CROP = 224 / 256  # validation: the crop's side over the resized shorter side
DCT_SCALES = (8, 4, 2)  # what libjpeg can decode at: 1/8, 1/4, 1/2 of the size

Batches = Iterator[tuple[torch.Tensor, torch.Tensor]]


class MissingData(FileNotFoundError):
    pass


def shards(data_dir: Path, pattern: str) -> list[Path]:
    return sorted(p for p in data_dir.glob(pattern) if p.is_file())


def synthetic_batches(batch_size: int, image_size: int, device: torch.device,
                      seed: int) -> Batches:
    """One random batch made once and fed forever: the network and the all-reduce, no I/O."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
    labels = torch.randint(0, CLASSES, (batch_size,), generator=generator)
    images, labels = images.to(device), labels.to(device)
    while True:
        yield images, labels


# --- what to crop --------------------------------------------------------------------------


@dataclass(frozen=True)
class Crop:
    """A box of the full-size image (pixels, right and bottom exclusive), and whether to flip
    the result left to right."""

    left: int
    top: int
    right: int
    bottom: int
    flip: bool = False

    def as_tensor(self) -> torch.Tensor:
        return torch.tensor([self.left, self.top, self.right, self.bottom, int(self.flip)])


def random_crop(width: int, height: int, rng: random.Random) -> Crop:
    """35-100% of the area at the image's aspect ratio, at a random place; flipped half the
    time (the legacy pipeline draws the same numbers in the same order)."""
    scale = rng.uniform(0.35, 1.0) ** 0.5
    crop_w, crop_h = max(1, int(width * scale)), max(1, int(height * scale))
    left, top = rng.randint(0, width - crop_w), rng.randint(0, height - crop_h)
    return Crop(left, top, left + crop_w, top + crop_h, rng.random() < 0.5)


def center_crop(width: int, height: int) -> Crop:
    """The centered square that resizing the shorter side to 256 and cropping 224 keeps."""
    side = max(1, round(min(width, height) * CENTER_CROP))
    left, top = (width - side) // 2, (height - side) // 2
    return Crop(left, top, left + side, top + side)


def dct_scale(crop: Crop, image_size: int) -> int:
    """The largest JPEG DCT scale-down that leaves the crop at least ``image_size`` pixels on
    its shorter side (1: decode at full size)."""
    shorter = min(crop.right - crop.left, crop.bottom - crop.top)
    return next((k for k in DCT_SCALES if shorter >= k * image_size), 1)


def crop_resize(image: torch.Tensor, crop: Crop, image_size: int) -> torch.Tensor:
    """Crop ``image`` (3×H×W, any strides) and resize it to image_size² in one antialiased
    bilinear pass (what Pillow's ``resize`` does); flipped if the crop says so. uint8 on the CPU
    stays uint8 (rounded; PyTorch's vectorized kernel), anything else becomes 0-255 float."""
    region = image[None, :, crop.top:crop.bottom, crop.left:crop.right]
    if not (region.dtype == torch.uint8 and region.device.type == "cpu"):
        region = region.float()
    region = region.contiguous(memory_format=torch.channels_last)
    out = functional.interpolate(region, size=(image_size, image_size), mode="bilinear",
                                 antialias=True, align_corners=False)[0]
    return out.flip(-1) if crop.flip else out  # the batch's collation makes it contiguous


def scaled(crop: Crop, width: int, height: int, full_width: int, full_height: int) -> Crop:
    """The box on the image decoded at width × height instead of its full size."""
    sx, sy = width / full_width, height / full_height
    left, top = min(int(crop.left * sx), width - 1), min(int(crop.top * sy), height - 1)
    right = min(max(left + 1, round(crop.right * sx)), width)
    bottom = min(max(top + 1, round(crop.bottom * sy)), height)
    return Crop(left, top, right, bottom, crop.flip)


def normalize(images: torch.Tensor) -> torch.Tensor:
    """RGB uint8 (or 0-255 float) pixels to the network's normalized float32, where they are."""
    mean = (MEAN * 255).to(images.device)
    std = (STD * 255).to(images.device)
    return (images.float() - mean) / std


# --- per-record work, in the loader's workers ------------------------------------------------


def _label_and_jpeg(example: bytes) -> tuple[int, bytes]:
    features = tfrecord.parse_example(example)
    label = int(features["image/class/label"][0]) - 1  # the TFRecords count classes from 1
    encoded = features["image/encoded"][0]
    assert isinstance(encoded, bytes)
    return label, encoded


def choose_crop(width: int, height: int, train: bool, rng: random.Random) -> Crop:
    return random_crop(width, height, rng) if train else center_crop(width, height)


def decode_cpu(example: bytes, image_size: int, train: bool,
               rng: random.Random) -> tuple[torch.Tensor, int]:
    """uint8 size×size×3 RGB pixels (channels last: batches of them collate without a
    transposing copy): the box first, from the JPEG's header, then a decode only as large as
    the box needs."""
    label, encoded = _label_and_jpeg(example)
    if simplejpeg is not None:
        try:
            height, width = simplejpeg.decode_jpeg_header(encoded)[:2]
            crop = choose_crop(width, height, train, rng)
            k = dct_scale(crop, image_size)  # libjpeg picks 1/k for these least sizes
            array = simplejpeg.decode_jpeg(encoded, colorspace="RGB", min_height=-(-height // k),
                                           min_width=-(-width // k))
        except ValueError:  # CMYK, or not a JPEG at all: Pillow's turn
            return decode_pillow(encoded, label, image_size, train, rng)
        pixels = torch.from_numpy(array).permute(2, 0, 1)
        crop = scaled(crop, pixels.shape[2], pixels.shape[1], width, height)
        return crop_resize(pixels, crop, image_size).permute(1, 2, 0), label
    return decode_pillow(encoded, label, image_size, train, rng)


def decode_pillow(encoded: bytes, label: int, image_size: int, train: bool,
                  rng: random.Random) -> tuple[torch.Tensor, int]:
    """decode_cpu with Pillow: any image format, a little slower on JPEGs."""
    from PIL import Image

    with Image.open(io.BytesIO(encoded)) as image:
        width, height = image.size
        crop = choose_crop(width, height, train, rng)
        k = dct_scale(crop, image_size)
        image.draft("RGB", (width // k, height // k) if k > 1 else None)
        image.load()
        crop = scaled(crop, image.width, image.height, width, height)
        region = image.crop((crop.left, crop.top, crop.right, crop.bottom))
    if region.mode != "RGB":  # grey or CMYK JPEGs, PNGs in disguise
        region = region.convert("RGB")
    pixels = torch.frombuffer(bytearray(region.tobytes()), dtype=torch.uint8)
    pixels = pixels.view(region.height, region.width, 3).permute(2, 0, 1)
    box = Crop(0, 0, region.width, region.height, crop.flip)
    return crop_resize(pixels, box, image_size).permute(1, 2, 0), label


def locate(example: bytes, image_size: int, train: bool,
           rng: random.Random) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The JPEG's bytes and its crop box, from its header only: the GPU decodes."""
    from PIL import Image

    label, encoded = _label_and_jpeg(example)
    with Image.open(io.BytesIO(encoded)) as image:
        crop = choose_crop(*image.size, train, rng)
    return torch.frombuffer(bytearray(encoded), dtype=torch.uint8), crop.as_tensor(), label


def decode_legacy(example: bytes, image_size: int, train: bool,
                  rng: random.Random) -> tuple[torch.Tensor, int]:
    """The first pipeline: full-size decode, crop, resize, float32 normalized on the CPU."""
    from PIL import Image

    label, encoded = _label_and_jpeg(example)
    with Image.open(io.BytesIO(encoded)) as opened:
        image = opened.convert("RGB")
    if train:
        crop = random_crop(*image.size, rng)
        image = image.crop((crop.left, crop.top, crop.right, crop.bottom))
        if crop.flip:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
    pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    tensor = pixels.view(image_size, image_size, 3).permute(2, 0, 1).float() / 255
    return (tensor - MEAN) / STD, label


PREPARE: dict[str, Callable[..., Any]] = {
    "cpu": decode_cpu, "gpu": locate, "legacy": decode_legacy}


def collate_jpegs(items: list[tuple[torch.Tensor, torch.Tensor, int]]
                  ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """JPEGs of different lengths stay a list; boxes and labels stack."""
    return ([jpeg for jpeg, _, _ in items], torch.stack([box for _, box, _ in items]),
            torch.tensor([label for _, _, label in items]))


class ShardReader(IterableDataset[Any]):
    """This rank's shards (every ``world``-th), split again among the loader's workers."""

    def __init__(self, files: list[Path], rank: int, world: int, image_size: int,
                 train: bool, repeat: bool, pipeline: str = "cpu") -> None:
        self.files = files[rank::world] or files[rank % len(files)::len(files)]
        self.image_size, self.train, self.repeat, self.seed = image_size, train, repeat, rank
        self.prepare = PREPARE[pipeline]

    def __iter__(self) -> Iterator[Any]:
        worker = get_worker_info()
        files = self.files if worker is None else self.files[worker.id::worker.num_workers]
        rng = random.Random(self.seed * 1000 + (worker.id if worker else 0))
        while True:
            order = list(files)
            if self.train:
                rng.shuffle(order)
            for path in order:
                for record in tfrecord.read_file(path):
                    yield self.prepare(record, self.image_size, self.train, rng)
            if not self.repeat:
                return


# --- choosing a pipeline, and the batches a rank trains on -----------------------------------


def gpu_decoder_problem(device: torch.device) -> str | None:
    """Why nvJPEG cannot decode on ``device``, or None when a test JPEG decodes there."""
    if device.type != "cuda":
        return "no CUDA device"
    try:
        from PIL import Image
        from torchvision.io import ImageReadMode, decode_jpeg
    except ImportError as exc:
        return f"torchvision's decoder is not installed ({exc})"
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 30, 90)).save(buffer, "JPEG")
    try:
        jpeg = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        decoded = decode_jpeg([jpeg], mode=ImageReadMode.RGB, device=device)[0]
    except (RuntimeError, TypeError) as exc:
        return f"nvJPEG failed on a test image ({exc})"
    return None if tuple(decoded.shape) == (3, 16, 16) else "nvJPEG decoded a wrong shape"


@dataclass(frozen=True)
class Pipeline:
    name: str  # cpu, gpu or legacy
    decoder: str  # libjpeg-turbo (pillow without simplejpeg), nvjpeg or pillow-legacy
    why: str = ""  # why auto chose it


def choose_pipeline(requested: str, device: torch.device) -> Pipeline:
    if requested not in PIPELINES:
        raise ValueError(f"unknown input pipeline {requested!r}; one of {', '.join(PIPELINES)}")
    if requested != "auto":
        return Pipeline(requested, DECODERS[requested], "asked for")
    problem = gpu_decoder_problem(device)
    if problem is None:
        return Pipeline("gpu", DECODERS["gpu"], f"nvJPEG works on {device}")
    return Pipeline("cpu", DECODERS["cpu"], problem)


def loader(data_dir: Path, rank: int, world: int, batch_size: int, image_size: int,
           workers: int, pipeline: str, train: bool = True,
           pin_memory: bool = False) -> DataLoader[Any]:
    pattern = TRAIN_PATTERN if train else VALIDATION_PATTERN
    files = shards(data_dir, pattern)
    if not files:
        raise MissingData(f"no {pattern} TFRecord shards in {data_dir}")
    reader = ShardReader(files, rank, world, image_size, train, repeat=train, pipeline=pipeline)
    workers = min(workers, len(reader.files))
    return DataLoader(reader, batch_size=batch_size, num_workers=workers, drop_last=train,
                      persistent_workers=workers > 0, pin_memory=pin_memory,
                      collate_fn=collate_jpegs if pipeline == "gpu" else None)


def decode_on_device(jpegs: list[torch.Tensor], boxes: torch.Tensor, image_size: int,
                     device: torch.device) -> torch.Tensor:
    """A batch of JPEGs decoded, cropped and resized on the GPU, as 0-255 float. A JPEG
    nvJPEG refuses (CMYK, a PNG in disguise) is decoded by Pillow instead."""
    import numpy
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        decoded = decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        decoded = []
        for jpeg in jpegs:
            try:
                decoded.append(decode_jpeg(jpeg, mode=ImageReadMode.RGB, device=device))
            except RuntimeError:
                with Image.open(io.BytesIO(jpeg.numpy().tobytes())) as image:
                    pixels = torch.from_numpy(numpy.array(image.convert("RGB")))
                decoded.append(pixels.permute(2, 0, 1).to(device))
    return torch.stack([
        crop_resize(image, Crop(left, top, right, bottom, flip=bool(flip)), image_size)
        for image, (left, top, right, bottom, flip) in zip(decoded, boxes.tolist(),
                                                          strict=True)])


def device_batches(data_dir: Path, rank: int, world: int, batch_size: int, image_size: int,
                   workers: int, pipeline: Pipeline, device: torch.device,
                   train: bool = True) -> Batches:
    """Normalized float32 images and labels on ``device``; copies from pinned memory do not
    wait for the GPU, and nothing here synchronizes with it."""
    cuda = device.type == "cuda"
    batches = loader(data_dir, rank, world, batch_size, image_size, workers, pipeline.name,
                     train, pin_memory=cuda)
    for batch in batches:
        if pipeline.name == "gpu":
            jpegs, boxes, labels = batch
            images = decode_on_device(jpegs, boxes, image_size, device)
        else:
            images, labels = batch
            images = images.to(device, non_blocking=True)
            if pipeline.name == "cpu":  # N×H×W×3: a channels-last N×3×H×W view
                images = images.permute(0, 3, 1, 2)
        labels = labels.to(device, non_blocking=True)
        yield (images if pipeline.name == "legacy" else normalize(images)), labels
