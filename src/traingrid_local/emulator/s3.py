"""Adaptation (moto 5.2.5): S3 objects overwritten while another request still uses them.

moto closes an object's buffer the moment a newer upload replaces it, so a simultaneous upload
of the same key that is still answering (its ETag, its event notification) or a download still
reading fails with "I/O operation on closed file". S3 serves every one of those requests. Here
a replaced version is only marked disposed, and its buffer is closed when nothing refers to it
any more.
"""

from __future__ import annotations

from typing import Any

from moto.s3.utils import _VersionedKeyStore

from traingrid_local.emulator.patching import PATCHES


def _setlist(self: _VersionedKeyStore, key: Any, list_: Any) -> Any:
    kept = list(list_) if isinstance(list_, list | tuple) else [list_]
    for version in self.getlist(key, []):
        if version not in kept and hasattr(version, "disposed"):
            version.disposed = True  # closed by its finaliser, without a warning
    dict.__setitem__(self, key, kept)


def apply() -> None:
    PATCHES.replace(_VersionedKeyStore, "setlist", _setlist)
