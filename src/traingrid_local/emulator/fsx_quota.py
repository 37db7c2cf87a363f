"""Adaptation (moto 5.2.5): FSx for Lustre's account-level storage quota, enforced.

FSx for Lustre's storage is an adjustable Service Quota per account and region: "Lustre
Scratch storage capacity 100800: The maximum amount of storage capacity (in GiB) that you can
configure for all Amazon FSx for Lustre scratch file systems in this account", and likewise
Persistent_1 and Persistent_2 (FSx for Lustre User Guide, "Quotas"). FSx refuses a file system
beyond it with ``ServiceLimitExceeded`` ("An error indicating that a particular service limit
was exceeded", whose ``Limit`` is ``TOTAL_STORAGE``: botocore fsx). moto creates any.

Here CreateFileSystem adds the new file system's capacity to those of the region's file
systems that count against the same quota and refuses it with ``ServiceLimitExceeded`` when
the sum is above the account's value (``emulator/account.py``: AWS's default, 100,800 GiB,
unless a test sets another with ``ACCOUNT.set_quota("fsx", ...)``). ``emulator/fsx.py`` wraps
this: the request's own checks come first, and a repeated ``ClientRequestToken`` returns the
file system it made before the quota would count it again.
"""

from __future__ import annotations

import json
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.fsx.models import FSxBackend

from traingrid.vocabulary.catalog import fsx_storage_quota
from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.emulator.patching import PATCHES


class ServiceLimitExceeded(JsonRESTError):
    def __init__(self, message: str) -> None:
        super().__init__("ServiceLimitExceeded", message)
        # The shape's required member, beside the message.
        self.description = json.dumps({"__type": "ServiceLimitExceeded", "message": message,
                                       "Message": message, "Limit": "TOTAL_STORAGE"})


def _deployment_type(lustre: dict[str, Any] | None) -> str:
    return (lustre or {}).get("DeploymentType", "SCRATCH_1")


def storage_in_use(backend: FSxBackend, deployment_type: str) -> int:
    """GiB that the region's Lustre file systems hold against ``deployment_type``'s quota."""
    quota = fsx_storage_quota(deployment_type)
    return sum(int(fs.storage_capacity or 0) for fs in backend.file_systems.values()
               if fs.file_system_type == "LUSTRE"
               and fsx_storage_quota(_deployment_type(fs.lustre_configuration)) == quota)


def _create_file_system(previous: Any) -> Any:
    def create_file_system(self: FSxBackend, client_request_token: str | None = None,
                           **kwargs: Any) -> Any:
        if kwargs.get("file_system_type") == "LUSTRE":
            kind = _deployment_type(kwargs.get("lustre_configuration"))
            quota = fsx_storage_quota(kind)
            spec = ACCOUNT.spec("fsx", quota.code)
            limit = int(ACCOUNT.value(self.region_name, spec))
            asked = int(kwargs.get("storage_capacity") or 0)
            used = storage_in_use(self, kind)
            if used + asked > limit:
                raise ServiceLimitExceeded(
                    f"Account limit exceeded: {quota.name} ({quota.code}) is {limit:,} GiB in "
                    f"{self.region_name}; file systems hold {used:,} GiB and this one asks "
                    f"for {asked:,} GiB")
        return previous(self, client_request_token=client_request_token, **kwargs)

    return create_file_system


def apply() -> None:
    PATCHES.wrap(FSxBackend, "create_file_system", _create_file_system)
