"""Simultaneous uploads of one key all succeed, and the last one's bytes are what S3 holds."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from traingrid_local.emulator.session import Emulator


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
