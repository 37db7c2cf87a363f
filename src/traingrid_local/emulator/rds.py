"""Adaptation (moto 5.2.5): a DB subnet group covers two Availability Zones, as RDS requires.

moto's RDS takes a DB subnet group of any subnets. RDS refuses one whose subnets are all in
one zone: "Subnets in the DB subnet group should cover at least two Availability Zones unless
there is only one Availability Zone" (botocore rds, CreateDBSubnetGroup's error
``DBSubnetGroupDoesNotCoverEnoughAZs``, also ModifyDBSubnetGroup's). Here CreateDBSubnetGroup,
ModifyDBSubnetGroup and CloudFormation's ``AWS::RDS::DBSubnetGroup`` (which creates through
the same backend call) refuse it the same way, with that code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from moto.rds.exceptions import RDSClientError
from moto.rds.models import RDSBackend

from traingrid_local.emulator.patching import PATCHES


class DBSubnetGroupDoesNotCoverEnoughAZs(RDSClientError):
    def __init__(self, zones: list[str]) -> None:
        super().__init__(
            "DBSubnetGroupDoesNotCoverEnoughAZs",
            "The DB subnet group doesn't meet Availability Zone (AZ) coverage requirement. "
            f"Current AZ coverage: {', '.join(zones) or 'none'}. Add subnets to cover at "
            "least 2 AZs.")


def zones_of(subnets: Iterable[Any]) -> list[str]:
    return sorted({subnet.availability_zone for subnet in subnets})


def _require_two_zones(subnets: Iterable[Any]) -> None:
    zones = zones_of(subnets)
    if len(zones) < 2:
        raise DBSubnetGroupDoesNotCoverEnoughAZs(zones)


def _create_subnet_group(previous: Any) -> Any:
    def create_subnet_group(self: RDSBackend, subnet_name: str, description: str,
                            subnets: list[Any], tags: list[dict[str, str]]) -> Any:
        _require_two_zones(subnets)
        return previous(self, subnet_name, description, subnets, tags)

    return create_subnet_group


def _modify_db_subnet_group(previous: Any) -> Any:
    def modify_db_subnet_group(self: RDSBackend, subnet_name: str, description: str,
                               subnets: list[Any]) -> Any:
        _require_two_zones(subnets)
        return previous(self, subnet_name, description, subnets)

    return modify_db_subnet_group


def apply() -> None:
    PATCHES.wrap(RDSBackend, "create_subnet_group", _create_subnet_group)
    PATCHES.wrap(RDSBackend, "modify_db_subnet_group", _modify_db_subnet_group)
