"""``traingrid doctor``'s network check: the VPC and the training subnets, and their way out to
AWS's APIs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from traingrid_local.doctor.findings import BLOCKER, OK, WARNING, Aws, AwsError, Finding
from traingrid_local.doctor.needs import Needs


def network(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """The VPC and the training subnets: they exist, in that VPC, and one zone has a free
    address for every node (a cluster placement group keeps a job's nodes in one zone)."""
    name = "network"
    if not needs.vpc_id or not needs.subnet_ids:
        yield Finding(name, WARNING, (
            "VpcId and TrainingSubnetIds are not given: pass --parameter VpcId=vpc-… "
            "--parameter TrainingSubnetIds=subnet-…,subnet-… (or samconfig.toml's "
            "parameter_overrides) to check the network"))
        return
    try:
        vpc = aws.call("ec2", "describe_vpcs", VpcIds=[needs.vpc_id])["Vpcs"][0]
    except AwsError as error:
        if not error.code.startswith("InvalidVpcID"):
            raise
        yield Finding(name, BLOCKER, f"VPC {needs.vpc_id} does not exist in {needs.region}: "
                                     "deploy with the VpcId of the training VPC")
        return
    subnets = {s["SubnetId"]: s for s in aws.pages(
        "ec2", "describe_subnets", "Subnets",
        Filters=[{"Name": "subnet-id", "Values": needs.subnet_ids}])}
    problems = False
    for subnet_id in needs.subnet_ids:
        subnet = subnets.get(subnet_id)
        if subnet is None:
            problems = True
            yield Finding(name, BLOCKER, f"subnet {subnet_id} does not exist in {needs.region}: "
                                         "deploy with TrainingSubnetIds of that VPC's subnets")
        elif subnet["VpcId"] != needs.vpc_id:
            problems = True
            yield Finding(name, BLOCKER, (
                f"subnet {subnet_id} is in {subnet['VpcId']}, not in VpcId {needs.vpc_id}: "
                "every training subnet must be in the VPC"))
    if problems:
        return
    free_by_zone: dict[str, int] = defaultdict(int)
    for subnet_id in needs.subnet_ids:
        subnet = subnets[subnet_id]
        free_by_zone[subnet["AvailabilityZone"]] += int(subnet["AvailableIpAddressCount"])
    zone, free = max(free_by_zone.items(), key=lambda item: item[1])
    cidrs = ", ".join(a["CidrBlock"] for a in vpc.get("CidrBlockAssociationSet", [])
                      ) or vpc.get("CidrBlock", "")
    summary = (f"VPC {needs.vpc_id} ({cidrs}), subnets in "
               f"{', '.join(sorted(free_by_zone))}; {zone} has {free} free addresses")
    if free < needs.nodes:
        yield Finding(name, BLOCKER, (
            f"{summary}; {needs.nodes} nodes need {needs.nodes} in one zone: add a larger "
            "subnet in one zone to TrainingSubnetIds, or run fewer nodes"))
    else:
        yield Finding(name, OK, f"{summary} ≥ {needs.nodes} nodes")
    yield from _routes_to_aws(needs, aws)


# A private subnet's way out: a NAT gateway, a transit gateway, a NAT instance or appliance.
EGRESS_TARGETS = ("NatGatewayId", "TransitGatewayId", "InstanceId", "NetworkInterfaceId")


def _routes_to_aws(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """The functions in the training subnets (the API, the database's) call AWS's APIs: each
    subnet needs a default route out that is not an internet gateway (their interfaces have
    no public address), or the VPC endpoints of those APIs."""
    tables = list(aws.pages("ec2", "describe_route_tables", "RouteTables",
                            Filters=[{"Name": "vpc-id", "Values": [needs.vpc_id]}]))
    main = next((t for t in tables if any(a.get("Main") for a in t.get("Associations", []))),
                None)
    stranded = []
    for subnet_id in needs.subnet_ids:
        table = next((t for t in tables if any(a.get("SubnetId") == subnet_id
                                               for a in t.get("Associations", []))), main)
        routes = table.get("Routes", []) if table else []
        if not any(r.get("DestinationCidrBlock") == "0.0.0.0/0" and
                   any(r.get(k) for k in EGRESS_TARGETS) for r in routes):
            stranded.append(subnet_id)
    if not stranded:
        return
    endpoints = [e["ServiceName"].rsplit(".", 1)[-1] for e in aws.pages(
        "ec2", "describe_vpc_endpoints", "VpcEndpoints",
        Filters=[{"Name": "vpc-id", "Values": [needs.vpc_id]}])]
    where = f"subnet(s) {', '.join(stranded)} have no default route through a NAT gateway"
    if endpoints:
        yield Finding("network", WARNING, (
            f"{where}; the VPC has endpoints for {', '.join(sorted(set(endpoints)))}: every "
            "API the functions call (states, batch, fsx, sagemaker, secretsmanager, logs, "
            "sts…) needs one"))
    else:
        yield Finding("network", BLOCKER, (
            f"{where} and the VPC no endpoints: the functions in them cannot reach AWS's APIs. "
            "Add a NAT gateway route (0.0.0.0/0) to their route table, or VPC endpoints"))
