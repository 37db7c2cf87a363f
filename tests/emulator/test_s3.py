"""Simultaneous uploads of one key all succeed, and the last one's bytes are what S3 holds."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from traingrid_local.emulator.s3 import declare_size
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator


def test_simultaneous_uploads_and_downloads_of_one_key_all_succeed(emulator: Emulator) -> None:
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket="shared")
    s3.put_object(Bucket="shared", Key="k", Body=b"first")
    bodies = [f"upload-{i:03d}".encode() * 200 for i in range(64)]
    gate = threading.Barrier(len(bodies) * 2)

    def put(body: bytes) -> str:
        gate.wait(30)
        return s3.put_object(Bucket="shared", Key="k", Body=body)["ETag"]

    def get(_: int) -> bytes:
        gate.wait(30)
        return s3.get_object(Bucket="shared", Key="k")["Body"].read()

    with ThreadPoolExecutor(max_workers=len(bodies) * 2) as pool:
        puts = [pool.submit(put, body) for body in bodies]
        gets = [pool.submit(get, i) for i in range(len(bodies))]
        etags = [f.result() for f in puts]
        read = [f.result() for f in gets]

    assert len(set(etags)) == len(bodies)
    assert all(body == b"first" or body in bodies for body in read)
    assert s3.get_object(Bucket="shared", Key="k")["Body"].read() in bodies


def test_a_declared_6_gb_object_is_refused_by_copy_object_and_copied_in_parts(
        emulator: Emulator) -> None:
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket="data")
    s3.put_object(Bucket="data", Key="big", Body=b"b" * 100)
    declare_size(ACCOUNT_ID, "data", "big", 6 * 10**9)
    assert s3.list_objects_v2(Bucket="data")["Contents"][0]["Size"] == 6 * 10**9

    with pytest.raises(ClientError) as refused:
        s3.copy_object(Bucket="data", Key="copy", CopySource={"Bucket": "data", "Key": "big"})
    assert refused.value.response["Error"]["Code"] == "InvalidRequest"
    assert "larger than the maximum allowable size for a copy source" in str(refused.value)

    upload = s3.create_multipart_upload(Bucket="data", Key="copy")["UploadId"]
    half = 3 * 10**9
    parts = [{"PartNumber": n, "ETag": s3.upload_part_copy(
        Bucket="data", Key="copy", UploadId=upload, PartNumber=n,
        CopySource={"Bucket": "data", "Key": "big"},
        CopySourceRange=f"bytes={first}-{first + half - 1}")["CopyPartResult"]["ETag"]}
        for n, first in ((1, 0), (2, half))]
    listed = s3.list_parts(Bucket="data", Key="copy", UploadId=upload)["Parts"]
    assert [p["Size"] for p in listed] == [half, half]
    s3.complete_multipart_upload(Bucket="data", Key="copy", UploadId=upload,
                                 MultipartUpload={"Parts": parts})
    assert s3.head_object(Bucket="data", Key="copy")["ContentLength"] == 6 * 10**9
