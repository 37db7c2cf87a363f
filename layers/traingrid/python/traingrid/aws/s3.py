"""S3: measuring datasets, listing archives, reading manifests, writing JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from traingrid.aws.clients import client
from traingrid.aws.errors import translated
from traingrid.errors import ResourceNotFound
from traingrid.validation import load_json


def objects_under(bucket: str, prefix: str, region: str | None = None
                  ) -> Iterator[dict[str, Any]]:
    """Every object under ``prefix`` as ``{key, size, etag}``, in key order."""
    paginator = client("s3", region).get_paginator("list_objects_v2")
    with translated("S3", "ListObjectsV2"):
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield {"key": item["Key"], "size": item["Size"], "etag": item["ETag"].strip('"')}


@dataclass(frozen=True)
class JsonObject:
    document: Any
    last_modified: datetime


def get_json(bucket: str, key: str, max_bytes: int = 256 * 1024) -> JsonObject:
    """A small JSON object and when it was written. Raises ValueError when it is too large or
    not JSON."""
    s3 = client("s3")
    return _json_object(
        f"s3://{bucket}/{key}", max_bytes,
        lambda: s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{max_bytes}"),
        lambda: s3.get_object(Bucket=bucket, Key=key),
    )


def get_json_version(bucket: str, key: str, version_id: str,
                     max_bytes: int = 256 * 1024) -> JsonObject:
    """One version of a small JSON object, as ``get_json`` (reading a version is a call of its
    own: it needs s3:GetObjectVersion)."""
    s3 = client("s3")
    return _json_object(
        f"s3://{bucket}/{key}", max_bytes,
        lambda: s3.get_object(Bucket=bucket, Key=key, VersionId=version_id,
                              Range=f"bytes=0-{max_bytes}"),
        lambda: s3.get_object(Bucket=bucket, Key=key, VersionId=version_id),
    )


def _json_object(uri: str, max_bytes: int, ranged: Callable[[], dict[str, Any]],
                 whole: Callable[[], dict[str, Any]]) -> JsonObject:
    with translated("S3", "GetObject"):
        try:
            response = ranged()
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "InvalidRange":
                raise
            # An empty object has no first byte for a range to start at.
            response = whole()
        data = response["Body"].read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{uri} is larger than {max_bytes} bytes")
    return JsonObject(load_json(data or b"{}"), response["LastModified"])


def read_text_tail(bucket: str, key: str, max_bytes: int = 64 * 1024) -> str | None:
    """The last ``max_bytes`` of a text object, or None if there is no such object."""
    try:
        with translated("S3", "GetObject"):
            response = client("s3").get_object(Bucket=bucket, Key=key,
                                               Range=f"bytes=-{max_bytes}")
    except ResourceNotFound:
        return None
    return response["Body"].read().decode("utf-8", "replace")


def write_json(bucket: str, key: str, document: Any) -> str:
    with translated("S3", "PutObject"):
        client("s3").put_object(
            Bucket=bucket,
            Key=key,
            Body=json.dumps(document, indent=2, sort_keys=True).encode(),
            ContentType="application/json",
        )
    return f"s3://{bucket}/{key}"


def copy_prefix(source_bucket: str, source_prefix: str, target_bucket: str, target_prefix: str,
                target_region: str, source_region: str | None = None,
                skip_suffix: str | None = None) -> tuple[int, int]:
    """Server-side copy of the objects under a prefix into another region; how many objects
    and bytes it copied."""
    s3 = client("s3", target_region)
    copied = copied_bytes = 0
    for item in objects_under(source_bucket, source_prefix, source_region):
        if skip_suffix and item["key"].endswith(skip_suffix):
            continue
        with translated("S3", "CopyObject"):
            s3.copy_object(
                Bucket=target_bucket,
                Key=target_prefix + item["key"].removeprefix(source_prefix),
                CopySource={"Bucket": source_bucket, "Key": item["key"]},
            )
        copied += 1
        copied_bytes += item["size"]
    return copied, copied_bytes
