"""What the emulated account refuses as AWS does: a one-zone DB subnet group (emulator/rds.py)
and file systems beyond FSx for Lustre's storage quota (emulator/fsx_quota.py)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from traingrid_local.emulator.account import ACCOUNT


def subnets(emulator, zones: str) -> list[str]:
    ec2 = emulator.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    return [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.30.{i}.0/24",
                              AvailabilityZone=f"us-east-1{zone}")["Subnet"]["SubnetId"]
            for i, zone in enumerate(zones)]


def test_a_db_subnet_group_in_one_zone_is_refused_as_rds_refuses_it(emulator):
    rds = emulator.client("rds")

    with pytest.raises(ClientError) as refused:
        rds.create_db_subnet_group(DBSubnetGroupName="one-zone", DBSubnetGroupDescription="x",
                                   SubnetIds=subnets(emulator, "aa"))

    assert refused.value.response["Error"]["Code"] == "DBSubnetGroupDoesNotCoverEnoughAZs"
    assert "us-east-1a" in refused.value.response["Error"]["Message"]
    two = rds.create_db_subnet_group(DBSubnetGroupName="two-zones",
                                     DBSubnetGroupDescription="x",
                                     SubnetIds=subnets(emulator, "ab"))
    assert len(two["DBSubnetGroup"]["Subnets"]) == 2


def lustre(fsx, gib: int, token: str | None = None, kind: str = "SCRATCH_2") -> dict:
    extra = {"ClientRequestToken": token} if token else {}
    return fsx.create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=gib, SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": kind}, **extra)["FileSystem"]


def test_file_systems_beyond_the_accounts_fsx_quota_are_refused(emulator):
    fsx = emulator.client("fsx")
    quotas = emulator.client("service-quotas")
    applied = quotas.get_service_quota(ServiceCode="fsx", QuotaCode="L-AD2FC696")["Quota"]
    assert (applied["QuotaName"], applied["Value"]) == ("Lustre Scratch storage capacity",
                                                        100_800)

    ACCOUNT.set_quota("fsx", "L-AD2FC696", 4800)
    first = lustre(fsx, 2400, token="run-1")
    assert lustre(fsx, 2400, token="run-1")["FileSystemId"] == first["FileSystemId"]
    lustre(fsx, 2400)
    with pytest.raises(ClientError) as refused:
        lustre(fsx, 1200)
    error = refused.value.response["Error"]
    assert error["Code"] == "ServiceLimitExceeded"
    assert "L-AD2FC696" in error["Message"] and "4,800 GiB" in error["Message"]
    # Persistent file systems count against a quota of their own.
    fsx.create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=2400, SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_1", "PerUnitStorageThroughput": 50})
    # Deleting one frees its share.
    fsx.delete_file_system(FileSystemId=first["FileSystemId"])
    lustre(fsx, 2400)
