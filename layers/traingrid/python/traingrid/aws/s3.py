"""S3: measuring datasets, listing archives, reading manifests, writing JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client
from traingrid.errors import ResourceNotFound
from traingrid.validation import load_json


def objects_under(bucket: str, prefix: str, region: str | None = None, after: str = ""
                  ) -> Iterator[dict[str, Any]]:
    """Every object under ``prefix`` (after the key ``after``) as ``{key, size, etag}``, in key
    order."""
    paginator = client("s3", region).get_paginator("list_objects_v2")
    start = {"StartAfter": after} if after else {}
    with translated("S3", "ListObjectsV2"):
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix, **start):
            for item in page.get("Contents", []):
                yield {"key": item["Key"], "size": item["Size"], "etag": item["ETag"].strip('"')}


@dataclass(frozen=True)
class ListPage:
    """One ListObjectsV2 page: its objects as (key, size), its common prefixes, and the token
    of the next page (None on the last)."""

    objects: list[tuple[str, int]]
    prefixes: list[str]
    next_token: str | None


def lister(region: str | None = None, max_keys: int = 1000) -> Callable[..., ListPage]:
    """``list_page`` bound to one client, made here: a caller that lists from several threads
    shares it (botocore's clients are thread-safe, creating one is not)."""
    s3 = client("s3", region, listing=True)

    def list_page(bucket: str, prefix: str, *, delimiter: str = "", start_after: str = "",
                  token: str | None = None) -> ListPage:
        # ListObjectsV2: at most 1,000 keys a page (MaxKeys); NextContinuationToken while
        # IsTruncated; StartAfter "can be any key in the bucket" and is where listing starts;
        # with a Delimiter, CommonPrefixes group the keys up to it and "is filtered out from
        # results if it is not lexicographically greater than the StartAfter value".
        args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if delimiter:
            args["Delimiter"] = delimiter
        if token:
            args["ContinuationToken"] = token
        elif start_after:
            args["StartAfter"] = start_after
        with translated("S3", "ListObjectsV2"):
            page = s3.list_objects_v2(**args)
        return ListPage([(o["Key"], o["Size"]) for o in page.get("Contents", [])],
                        [p["Prefix"] for p in page.get("CommonPrefixes", [])],
                        page.get("NextContinuationToken") if page.get("IsTruncated") else None)

    return list_page


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


@dataclass(frozen=True)
class Tail:
    data: bytes  # the object's last bytes, at most the ones asked for
    size: int  # the whole object's


def read_tail(bucket: str, key: str, max_bytes: int) -> Tail | None:
    """The last ``max_bytes`` of an object and its size, or None if there is no such object."""
    try:
        with translated("S3", "GetObject"):
            try:
                response = client("s3").get_object(Bucket=bucket, Key=key,
                                                   Range=f"bytes=-{max_bytes}")
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "InvalidRange":
                    raise
                return Tail(b"", 0)  # an empty object has no last byte for a range to end at
            data = response["Body"].read(max_bytes)
    except ResourceNotFound:
        return None
    whole = str(response.get("ContentRange") or "").rpartition("/")[2]  # bytes a-b/size
    return Tail(data, int(whole) if whole.isdigit() else len(data))


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


def copy_object(region: str, bucket: str, key: str, source_bucket: str,
                source_key: str) -> None:
    """Server-side copy of one object of at most 5 GiB into ``region``."""
    with translated("S3", "CopyObject"):
        client("s3", region).copy_object(
            Bucket=bucket, Key=key, CopySource={"Bucket": source_bucket, "Key": source_key})


def start_multipart(region: str, bucket: str, key: str) -> str:
    with translated("S3", "CreateMultipartUpload"):
        return str(client("s3", region).create_multipart_upload(
            Bucket=bucket, Key=key)["UploadId"])


def copy_part(region: str, bucket: str, key: str, upload_id: str, part: int,
              source_bucket: str, source_key: str, source_range: str) -> None:
    """One part of a multipart upload, copied server-side from a byte range of the source."""
    with translated("S3", "UploadPartCopy"):
        client("s3", region).upload_part_copy(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=part,
            CopySource={"Bucket": source_bucket, "Key": source_key},
            CopySourceRange=source_range)


def finish_multipart(region: str, bucket: str, key: str, upload_id: str) -> None:
    """Complete an upload from the parts S3 holds (listed, so no caller keeps their ETags)."""
    s3 = client("s3", region)
    parts = []
    with translated("S3", "ListParts"):
        for page in s3.get_paginator("list_parts").paginate(
                Bucket=bucket, Key=key, UploadId=upload_id):
            parts += [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]}
                      for p in page.get("Parts", [])]
    with translated("S3", "CompleteMultipartUpload"):
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                     MultipartUpload={"Parts": parts})
