"""Adaptations (moto 5.2.5): S3 objects overwritten while another request still uses them, and
objects larger than this machine would want to hold.

moto closes an object's buffer the moment a newer upload replaces it, so a simultaneous upload
of the same key that is still answering (its ETag, its event notification) or a download still
reading fails with "I/O operation on closed file". S3 serves every one of those requests. Here
a replaced version is only marked disposed, and its buffer is closed when nothing refers to it
any more.

An object may be given a declared size (:func:`declare_size`), so a 6 GB object costs a few
bytes: listings and part listings report it; CopyObject refuses a source over 5 GiB, as S3 does
(moto copies any size); UploadPartCopy of a range makes a part of the range's size (held as a
5 MiB stand-in, S3's smallest part); a completed upload of such parts has their total size.
"""

from __future__ import annotations

from typing import Any

from moto.s3.exceptions import S3ClientError
from moto.s3.models import S3_UPLOAD_PART_MIN_SIZE, FakeKey, S3Backend, s3_backends
from moto.s3.utils import _VersionedKeyStore

from traingrid_local.emulator.attached import Attached
from traingrid_local.emulator.patching import PATCHES

COPY_SOURCE_LIMIT = 5 * 1024**3


class CopySourceTooLarge(S3ClientError):
    code = "InvalidRequest"

    def __init__(self) -> None:
        super().__init__("InvalidRequest", "The specified copy source is larger than the "
                         f"maximum allowable size for a copy source: {COPY_SOURCE_LIMIT}")


# The size an object counts as, on the object; none on an object sized by its content.
DECLARED_SIZE: Attached[int] = Attached("declared_size")


def declare_size(account_id: str, bucket: str, key: str, size: int) -> None:
    """Make an existing object count as ``size`` bytes (its content stays as it is)."""
    found = s3_backends[account_id]["aws"].get_object(bucket, key)
    if found is None:
        raise KeyError(f"s3://{bucket}/{key} does not exist: only an object's size is declared")
    DECLARED_SIZE.set(found, size)


def _declared(key: Any) -> int | None:
    return DECLARED_SIZE.get(key)


def _size(self: FakeKey) -> int:
    declared = _declared(self)
    return self.contentsize if declared is None else declared


def _copy_object(previous: Any) -> Any:
    def copy_object(self: S3Backend, src_key: FakeKey, dest_bucket_name: str,
                    dest_key_name: str, *args: Any, **kwargs: Any) -> None:
        if src_key.size > COPY_SOURCE_LIMIT:
            raise CopySourceTooLarge()
        previous(self, src_key, dest_bucket_name, dest_key_name, *args, **kwargs)
        if (declared := _declared(src_key)) is not None:
            DECLARED_SIZE.set(self.get_bucket(dest_bucket_name).keys[dest_key_name], declared)

    return copy_object


def _upload_part_copy(previous: Any) -> Any:
    def upload_part_copy(self: S3Backend, dest_bucket_name: str, multipart_id: str,
                         part_id: int, src_bucket_name: str, src_key_name: str,
                         src_version_id: str | None, start_byte: int, end_byte: int) -> Any:
        source = self.get_object(src_bucket_name, src_key_name, version_id=src_version_id)
        declared = _declared(source)
        if declared is None:
            return previous(self, dest_bucket_name, multipart_id, part_id, src_bucket_name,
                            src_key_name, src_version_id, start_byte, end_byte)
        multipart = self.get_bucket(dest_bucket_name).multiparts[multipart_id]
        part = multipart.set_part(part_id, bytes(S3_UPLOAD_PART_MIN_SIZE))
        DECLARED_SIZE.set(part, declared if start_byte is None else end_byte - start_byte + 1)
        return part

    return upload_part_copy


def _complete_multipart_upload(previous: Any) -> Any:
    def complete_multipart_upload(self: S3Backend, bucket_name: str, multipart_id: str,
                                  body: Any) -> Any:
        multipart = self.get_bucket(bucket_name).multiparts.get(multipart_id)
        parts = list(multipart.parts.values()) if multipart is not None else []
        total = sum(p.size for p in parts) if any(_declared(p) is not None for p in parts) \
            else None
        key = previous(self, bucket_name, multipart_id, body)
        if key is not None and total is not None:
            DECLARED_SIZE.set(key, total)
        return key

    return complete_multipart_upload


def _setlist(self: _VersionedKeyStore, key: Any, list_: Any) -> Any:
    kept = list(list_) if isinstance(list_, list | tuple) else [list_]
    for version in self.getlist(key, []):
        if version not in kept and hasattr(version, "disposed"):
            version.disposed = True  # closed by its finaliser, without a warning
    dict.__setitem__(self, key, kept)


def apply() -> None:
    PATCHES.replace(_VersionedKeyStore, "setlist", _setlist)
    PATCHES.replace(FakeKey, "size", property(_size))
    PATCHES.wrap(S3Backend, "copy_object", _copy_object)
    PATCHES.wrap(S3Backend, "upload_part_copy", _upload_part_copy)
    PATCHES.wrap(S3Backend, "complete_multipart_upload", _complete_multipart_upload)
