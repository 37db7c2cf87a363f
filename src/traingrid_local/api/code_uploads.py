"""Putting a code package where a stack's runs read it: its data bucket's
``code/sha256/<hex>.tar.gz``, once (docs/your-code.md).

A deployed stack's bucket (its ``DataBucketName`` output) is written with S3 and the default
AWS credentials. The emulator behind ``traingrid serve`` has no S3 endpoint of its own: the
server takes a package on its own route, ``POST /_emulator/code``, in parts that each fit one of
its requests (it reads at most 6 MiB), and puts it in the emulated data bucket the same way.
"""

from __future__ import annotations

import base64
import binascii
import threading
from dataclasses import dataclass
from typing import Any

from traingrid_local.api.client import ApiClient, stack_outputs
from traingrid_node.code_package import (
    MAX_COMPRESSED_BYTES,
    PackageError,
    PackageUri,
    digest,
    key_for,
    parse_uri,
)

CODE_PATH = "/_emulator/code"
PART_BYTES = 4 * 2**20  # 5.4 MiB once in base64: under the local server's 6 MiB
MAX_PENDING = 4  # packages part-sent at once; the oldest is dropped for a fifth
MISSING = ("404", "NoSuchKey", "NotFound")


class UploadFailed(Exception):
    """S3 or the server refused the package, or could not say whether it is there."""


@dataclass(frozen=True)
class Uploaded:
    uri: PackageUri
    existed: bool  # already in the bucket: nothing was sent


def stored(s3: Any, bucket: str, key: str) -> bool:
    """Whether ``bucket`` holds ``key``; UploadFailed when S3 will not say."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in MISSING:
            return False
        raise UploadFailed(f"cannot read s3://{bucket}/{key}: {error}") from None
    except BotoCoreError as error:
        raise UploadFailed(f"cannot reach s3://{bucket}: {error}") from None
    return True


def store(s3: Any, uri: PackageUri, archive: bytes) -> Uploaded:
    """``archive`` put at ``uri`` unless it is there already; S3 checks the bytes it gets
    against their sha256."""
    from botocore.exceptions import BotoCoreError, ClientError

    if stored(s3, uri.bucket, uri.key):
        return Uploaded(uri, existed=True)
    checksum = base64.b64encode(bytes.fromhex(uri.sha256)).decode()
    try:
        s3.put_object(Bucket=uri.bucket, Key=uri.key, Body=archive, ChecksumSHA256=checksum,
                      ContentType="application/gzip")
    except (ClientError, BotoCoreError) as error:
        raise UploadFailed(f"cannot write {uri}: {error}") from None
    return Uploaded(uri, existed=False)


def to_stack(archive: bytes, stack: str, region: str) -> Uploaded:
    """Into a deployed stack's data bucket; Unreachable when the stack cannot be read."""
    session, outputs = stack_outputs(stack, region, "DataBucketName")
    sha256 = digest(archive)
    uri = PackageUri(outputs["DataBucketName"], key_for(sha256), sha256)
    return store(session.client("s3"), uri, archive)


def to_served(archive: bytes, client: ApiClient) -> Uploaded:
    """Into the data bucket of the emulator ``traingrid serve`` runs, a part at a time;
    ApiError or Unreachable as the server answers."""
    sha256 = digest(archive)
    answer = client.call("POST", CODE_PATH, {"sha256": sha256}).body
    if answer["exists"]:
        return Uploaded(parse_uri(answer["uri"]), existed=True)
    for offset in range(0, len(archive), PART_BYTES):
        part = base64.b64encode(archive[offset:offset + PART_BYTES]).decode()
        answer = client.call("POST", CODE_PATH, {
            "sha256": sha256, "size": str(len(archive)), "offset": str(offset),
            "part": part}).body
    return Uploaded(parse_uri(answer["uri"]), existed=bool(answer.get("exists")))


class ServedCode:
    """The served emulator's side of ``POST /_emulator/code``: with ``sha256`` alone, whether
    the package is in the bucket; with ``size``, ``offset`` and a base64 ``part`` too, the
    parts in order, the package stored once whole and hashing to its name."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3, self.bucket = s3, bucket
        self.pending: dict[str, bytearray] = {}
        self.lock = threading.Lock()

    def __call__(self, settings: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        settings = settings or {}
        try:
            sha256 = str(settings.get("sha256"))
            uri = PackageUri(self.bucket, key_for(sha256), sha256)
        except PackageError as error:
            return 400, {"message": f"sha256: {error}"}
        if settings.get("part") is None:
            return 200, {"uri": str(uri), "exists": stored(self.s3, self.bucket, uri.key)}
        try:
            size, offset = int(str(settings.get("size"))), int(str(settings.get("offset")))
            part = base64.b64decode(str(settings["part"]), validate=True)
        except (ValueError, binascii.Error) as error:
            return 400, {"message": f"size, offset and part: {error}"}
        if not 0 < size <= MAX_COMPRESSED_BYTES or len(part) > PART_BYTES:
            return 400, {"message": f"a package is 1 to {MAX_COMPRESSED_BYTES} bytes, sent in "
                                    f"parts of at most {PART_BYTES}"}
        with self.lock:
            whole = self._add(sha256, offset, part)
        if isinstance(whole, str):
            return 409, {"message": whole}
        if len(whole) < size:
            return 202, {"uri": str(uri), "received": len(whole)}
        with self.lock:
            self.pending.pop(sha256, None)
        if len(whole) > size or digest(bytes(whole)) != sha256:
            return 400, {"message": f"the parts sent make {len(whole)} bytes hashing to "
                                    f"{digest(bytes(whole))}, not {size} hashing to {sha256}"}
        return 201, {"uri": str(uri), "exists": store(self.s3, uri, bytes(whole)).existed}

    def _add(self, sha256: str, offset: int, part: bytes) -> bytearray | str:
        """The package's bytes so far with ``part`` added, or why it does not follow them."""
        if offset == 0:
            self.pending.pop(sha256, None)  # sent again from the start
            while len(self.pending) >= MAX_PENDING:
                self.pending.pop(next(iter(self.pending)))
            self.pending[sha256] = bytearray()
        received = self.pending.get(sha256)
        if received is None or offset != len(received):
            have = 0 if received is None else len(received)
            return f"part at {offset} does not follow the {have} bytes received: send from 0"
        received += part
        return received
