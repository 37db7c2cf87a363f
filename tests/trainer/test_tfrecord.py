import io

import pytest

from traingrid_trainer import tfrecord


def test_crc32c_matches_the_standard_check_value() -> None:
    assert tfrecord.crc32c(b"123456789") == 0xE3069283


def test_records_round_trip(tmp_path) -> None:
    records = [b"", b"x", bytes(range(256)) * 40]
    path = tmp_path / "train-00000-of-00001"
    tfrecord.write_records(path, records)
    assert list(tfrecord.read_file(path)) == records


def test_a_cut_file_is_refused(tmp_path) -> None:
    path = tmp_path / "train-00000-of-00001"
    tfrecord.write_records(path, [b"a" * 100, b"b" * 100])
    data = path.read_bytes()
    with pytest.raises(tfrecord.CorruptRecord, match="truncated"):
        list(tfrecord.read_records(io.BytesIO(data[:-50]), "cut"))
    with pytest.raises(tfrecord.CorruptRecord, match="bad length checksum"):
        list(tfrecord.read_records(io.BytesIO(b"not a tfrecord file at all"), "text"))


def test_examples_round_trip_with_bytes_and_integers() -> None:
    encoded = tfrecord.encode_example({"image/encoded": [b"\xff\xd8jpeg"],
                                       "image/class/label": [417],
                                       "image/object/bbox/label": [1, -2, 3]})
    features = tfrecord.parse_example(encoded)
    assert features["image/encoded"] == [b"\xff\xd8jpeg"]
    assert features["image/class/label"] == [417]
    assert features["image/object/bbox/label"] == [1, -2, 3]
