"""The input pipelines: what they crop and decode, how it compares with the first pipeline,
and the input benchmark's JSON line."""

from __future__ import annotations

import ast
import io
import json
import random

import numpy
import pytest
import torch
from PIL import Image
from sample_data import natural_jpeg, write_imagenet_like_shards, write_shards

from tests.trainer.conftest import MNP, run_trainer
from traingrid_trainer import bench, data, tfrecord

CATALOG = MNP.parents[1] / "layers/traingrid/python/traingrid/vocabulary/catalog.py"


def record(jpeg: bytes, label: int = 7) -> bytes:
    return tfrecord.encode_example({"image/encoded": [jpeg], "image/class/label": [label]})


def pixel_levels(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean absolute difference of two RGB images, in 0-255 levels."""
    return float((a.float() - b.float()).abs().mean())


def legacy_rgb(example: bytes, image_size: int, train: bool, seed: int) -> torch.Tensor:
    """The first pipeline's normalized float32 output, back in 0-255 levels."""
    tensor, _ = data.decode_legacy(example, image_size, train, random.Random(seed))
    return (tensor * data.STD + data.MEAN) * 255


@pytest.fixture(scope="module")
def photo() -> bytes:
    return record(natural_jpeg(500, 375, seed=1))


def test_training_crops_are_uint8_at_the_size_and_match_the_first_pipeline(photo) -> None:
    for seed in range(6):
        pixels, label = data.decode_cpu(photo, 224, True, random.Random(seed))
        assert (pixels.shape, pixels.dtype, label) == ((224, 224, 3), torch.uint8, 6)
        pixels = pixels.permute(2, 0, 1)
        # the same box and flip, decoded and resized another way: well under a level apart
        assert pixel_levels(pixels, legacy_rgb(photo, 224, True, seed)) < 1.0
    normalized = data.normalize(pixels[None])
    assert normalized.dtype == torch.float32
    assert float(normalized.min()) > -2.2 and float(normalized.max()) < 2.7
    assert abs(float(normalized.mean())) < 1.0


def test_pillow_decodes_what_is_no_plain_jpeg(photo) -> None:
    png = io.BytesIO()
    Image.open(io.BytesIO(natural_jpeg(300, 200, seed=2))).convert("L").save(png, "PNG")
    pixels, _ = data.decode_cpu(record(png.getvalue()), 64, True, random.Random(0))
    assert (pixels.shape, pixels.dtype) == ((64, 64, 3), torch.uint8)
    assert torch.equal(pixels[..., 0], pixels[..., 1])  # grey, made RGB
    cmyk = io.BytesIO()  # libjpeg-turbo refuses CMYK to RGB: Pillow converts it
    Image.new("CMYK", (300, 260), (10, 20, 30, 40)).save(cmyk, "JPEG")
    pixels, _ = data.decode_cpu(record(cmyk.getvalue()), 64, True, random.Random(0))
    with Image.open(io.BytesIO(cmyk.getvalue())) as image:
        expected = image.convert("RGB").getpixel((150, 130))
    means = pixels.float().mean(dim=(0, 1)).tolist()
    assert all(abs(mean - level) <= 1 for mean, level in zip(means, expected, strict=True))
    label, jpeg = data._label_and_jpeg(photo)
    by_pillow, _ = data.decode_pillow(jpeg, label, 224, True, random.Random(3))
    assert by_pillow.shape == (224, 224, 3)
    by_default, _ = data.decode_cpu(photo, 224, True, random.Random(3))
    assert pixel_levels(by_pillow, by_default) < 0.5


def test_validation_resizes_the_shorter_side_and_crops_the_center() -> None:
    # a 600×300 image whose left and right quarters are black: a 256/224 center crop of the
    # square middle keeps none of them; squeezing the whole image (the old way) keeps both
    image = Image.new("RGB", (600, 300), (0, 0, 0))
    image.paste((200, 120, 40), (150, 0, 450, 300))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=95)
    example = record(buffer.getvalue())
    pixels = data.decode_cpu(example, 224, False, random.Random(0))[0].permute(2, 0, 1)
    assert float(pixels[0, :, :8].float().mean()) > 180  # the crop's edges are in the middle
    assert float(pixels[0, :, -8:].float().mean()) > 180
    squeezed = legacy_rgb(example, 224, False, 0)
    assert float(squeezed[0, :, :8].mean()) < 20
    assert data.center_crop(600, 300) == data.Crop(169, 19, 431, 281)


def test_large_images_decode_at_a_reduced_scale_that_keeps_the_crop_over_the_size() -> None:
    assert data.dct_scale(data.Crop(0, 0, 300, 250), 224) == 1
    assert data.dct_scale(data.Crop(0, 0, 1000, 460), 224) == 2
    assert data.dct_scale(data.Crop(0, 0, 1800, 1800), 224) == 8
    jpeg = natural_jpeg(1600, 1200, seed=3)
    # center crop 1050 px: decoded at 1/4 (400 px of it a side, still over 224)
    assert data.dct_scale(data.center_crop(1600, 1200), 224) == 4
    pixels = data.decode_cpu(record(jpeg), 224, False, random.Random(0))[0].permute(2, 0, 1)
    # the box lands on the 1/4 grid: a few full-size pixels off, under one output pixel
    box = data.scaled(data.center_crop(1600, 1200), 400, 300, 1600, 1200)
    assert (box.left, box.top, box.right, box.bottom) == (68, 18, 331, 281)
    with Image.open(io.BytesIO(jpeg)) as full:  # the same box, resized from the full size
        reference = full.convert("RGB").resize((224, 224), Image.Resampling.BILINEAR,
                                               box=(272, 72, 1324, 1124))
    expected = torch.frombuffer(bytearray(reference.tobytes()), dtype=torch.uint8)
    assert pixel_levels(pixels, expected.view(224, 224, 3).permute(2, 0, 1)) < 4.0


def test_the_gpu_pipeline_workers_send_the_jpeg_and_the_box_the_cpu_would_crop(photo) -> None:
    jpeg, box, label = data.locate(photo, 224, True, random.Random(5))
    assert label == 6 and bytes(jpeg.numpy()) == data._label_and_jpeg(photo)[1]
    expected = data.random_crop(500, 375, random.Random(5))
    assert box.tolist() == [expected.left, expected.top, expected.right, expected.bottom,
                            int(expected.flip)]
    jpegs, boxes, labels = data.collate_jpegs([(jpeg, box, label)] * 3)
    assert len(jpegs) == 3 and boxes.shape == (3, 5) and labels.tolist() == [6, 6, 6]
    # the crop and resize the GPU runs, here on the CPU's float pixels
    full = torch.from_numpy(numpy.array(
        Image.open(io.BytesIO(bytes(jpeg.numpy()))).convert("RGB"))).permute(2, 0, 1)
    on_float = data.crop_resize(full.float(), expected, 224)
    assert on_float.dtype == torch.float32
    on_cpu = data.decode_cpu(photo, 224, True, random.Random(5))[0].permute(2, 0, 1)
    assert pixel_levels(on_float, on_cpu) < 1


def test_auto_takes_the_cpu_pipeline_without_a_gpu() -> None:
    chosen = data.choose_pipeline("auto", torch.device("cpu"))
    assert (chosen.name, chosen.decoder, chosen.why) == ("cpu", "libjpeg-turbo",
                                                         "no CUDA device")
    assert data.choose_pipeline("legacy", torch.device("cpu")).decoder == "pillow-legacy"
    with pytest.raises(ValueError, match="auto, cpu, gpu, legacy"):
        data.choose_pipeline("dali", torch.device("cpu"))


def test_batches_are_uint8_from_the_loader_and_normalized_float_on_the_device(tmp_path) -> None:
    write_imagenet_like_shards(tmp_path, shards=1, per_shard=4)
    loader = data.loader(tmp_path, 0, 1, 2, 64, 0, "cpu")
    images, labels = next(iter(loader))
    assert (images.shape, images.dtype, labels.tolist()) == ((2, 64, 64, 3), torch.uint8,
                                                             [0, 1])
    pipeline = data.choose_pipeline("cpu", torch.device("cpu"))
    images, labels = next(data.device_batches(tmp_path, 0, 1, 2, 64, 0, pipeline,
                                              torch.device("cpu")))
    assert images.dtype == torch.float32 and images.shape == (2, 3, 64, 64)
    assert images.is_contiguous(memory_format=torch.channels_last)


def test_the_input_benchmark_prints_one_json_line(tmp_path) -> None:
    write_shards(tmp_path, "train-{:05d}-of-{:05d}", shards=1, per_shard=8, size=(320, 240))
    result = run_trainer(["--benchmark_input", "--data_dir", str(tmp_path),
                          "--benchmark_seconds", "0.5", "-b", "4", "--image_size", "64"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    sizes = [len(r) for r in tfrecord.read_file(next(tmp_path.glob("train-*")))]
    assert line["mean_record_kib"] == round(sum(sizes) / len(sizes) / 1024, 1)
    assert line["images_per_s_per_worker"] > 0 and line["images"] % 4 == 0
    assert (line["decoder"], line["input_pipeline"], line["image_size"]) == (
        "libjpeg-turbo", "cpu", 64)


def test_how_many_gpus_the_vcpus_feed() -> None:
    rows = {row["instance_type"]: row for row in bench.feedable_gpus(300.0)}
    # p3.16xlarge: 56 vCPUs for workers × 300 = 16,800 images/s: 8 V100s need 9,600
    assert rows["p3.16xlarge"]["images_per_s_from_cpus"] == 16_800
    assert rows["p3.16xlarge"]["gpus_fed"] == 8
    # p4d: 88 × 300 = 26,400 feeds 10 A100s' worth: all 8; p3.2xlarge: 7 × 300 < 1,200
    assert rows["p4d.24xlarge"]["gpus_fed"] == 8 and rows["p3.2xlarge"]["gpus_fed"] == 1
    assert bench.feedable_gpus(100.0)[0]["gpus_fed"] == 0


@pytest.mark.skipif(not CATALOG.is_file(), reason="the runtime package is not beside")
def test_the_benchmark_copies_the_catalogs_figures() -> None:
    tree = ast.parse(CATALOG.read_text())
    rates = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.Assign)
                 and getattr(node.targets[0], "id", "") == "GPU_IMAGES_PER_S")
    assert rates == bench.GPU_IMAGES_PER_S
    types = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "InstanceType":
            name, gpus, vcpus = (ast.literal_eval(a) for a in node.args[:3])
            rate = next(k for k in node.keywords if k.arg == "gpu_images_per_s")
            types[name] = (gpus, vcpus, ast.literal_eval(rate.value.slice))
    assert types == bench.INSTANCE_TYPES


def test_the_gpu_benchmark_says_why_it_measures_nothing_without_a_gpu(capsys) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert bench.main(["gpu"]) == 0
    assert "no CUDA GPU on this machine" in capsys.readouterr().out


def test_parsed_features_are_bytes_not_views_of_the_record(photo) -> None:
    features = tfrecord.parse_example(photo)
    assert isinstance(features["image/encoded"][0], bytes)
    assert features["image/class/label"] == [7]
