"""TFRecord files of ``tf.train.Example`` records, read and written with the standard library.

The resized ImageNet the seed's runs train on is TFRecord shards (``train-00000-of-01024``,
``validation-00000-of-00128``) of Examples holding ``image/encoded`` (a JPEG) and
``image/class/label`` (1-1000). Reading them needs neither TensorFlow nor protobuf: a record is
a length, its masked CRC-32C, the bytes and their CRC; an Example is three nested messages.
The length's CRC is checked (a cut or misaligned file fails at once); the data's is not, since
computing it in Python would cost more than decoding the image.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

Feature = list[bytes] | list[int] | list[float]


class CorruptRecord(ValueError):
    pass


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(stream: BinaryIO, name: str = "<stream>") -> Iterator[bytes]:
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise CorruptRecord(f"{name}: truncated record header")
        length_bytes, (length_crc,) = header[:8], struct.unpack("<I", header[8:])
        if masked_crc(length_bytes) != length_crc:
            raise CorruptRecord(f"{name}: bad length checksum (not a TFRecord file?)")
        (length,) = struct.unpack("<Q", length_bytes)
        data = stream.read(length)
        if len(data) < length or len(stream.read(4)) < 4:
            raise CorruptRecord(f"{name}: truncated record")
        yield data


def read_file(path: Path) -> Iterator[bytes]:
    with path.open("rb") as stream:
        yield from read_records(stream, str(path))


def write_records(path: Path, records: Sequence[bytes]) -> None:
    with path.open("wb") as stream:
        for data in records:
            length = struct.pack("<Q", len(data))
            stream.write(length + struct.pack("<I", masked_crc(length)))
            stream.write(data + struct.pack("<I", masked_crc(data)))


# --- protobuf wire format, just enough for tf.train.Example --------------------------------


Buffer = bytes | memoryview  # messages are parsed on views: a 100 KB JPEG is copied once


def _varint(data: Buffer, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise CorruptRecord("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: Buffer) -> Iterator[tuple[int, int, Buffer | int]]:
    """(field number, wire type, value) of each field of a message."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            size, pos = _varint(data, pos)
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire == 5:
            yield number, wire, data[pos:pos + 4]
            pos += 4
        elif wire == 1:
            yield number, wire, data[pos:pos + 8]
            pos += 8
        else:
            raise CorruptRecord(f"unsupported wire type {wire}")


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature(data: Buffer) -> Feature:
    for kind, _, payload in _fields(data):
        assert isinstance(payload, memoryview)
        values = list(_fields(payload))
        if kind == 1:  # BytesList
            return [bytes(v) for _, _, v in values if isinstance(v, memoryview)]
        if kind == 2:  # FloatList, packed or not
            raw = b"".join(v for _, _, v in values if isinstance(v, memoryview))
            return list(struct.unpack(f"<{len(raw) // 4}f", raw))
        if kind == 3:  # Int64List, packed or not
            ints: list[int] = []
            for _, wire, v in values:
                if wire == 0 and isinstance(v, int):
                    ints.append(_signed64(v))
                elif isinstance(v, memoryview):
                    pos = 0
                    while pos < len(v):
                        number, pos = _varint(v, pos)
                        ints.append(_signed64(number))
            return ints
    return []


def parse_example(data: bytes) -> dict[str, Feature]:
    features: dict[str, Feature] = {}
    for number, _, features_message in _fields(memoryview(data)):
        if number != 1 or not isinstance(features_message, memoryview):
            continue
        for _, _, entry in _fields(features_message):
            assert isinstance(entry, memoryview)
            key, value = "", memoryview(b"")
            for field, _, payload in _fields(entry):
                if field == 1 and isinstance(payload, memoryview):
                    key = bytes(payload).decode()
                elif field == 2 and isinstance(payload, memoryview):
                    value = payload
            features[key] = _feature(value)
    return features


def _message(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode_example(features: Mapping[str, Sequence[bytes] | Sequence[int]]) -> bytes:
    """An Example of bytes and int64 features (packed), as TensorFlow writes them."""
    entries = b""
    for key, values in features.items():
        if all(isinstance(v, bytes) for v in values):
            feature = _message(1, b"".join(_message(1, v) for v in values  # type: ignore[arg-type]
                                           ))
        else:
            packed = b"".join(_encode_varint(int(v)) for v in values)  # type: ignore[arg-type]
            feature = _message(3, _message(1, packed))
        entries += _message(1, _message(1, key.encode()) + _message(2, feature))
    return _message(1, entries)
