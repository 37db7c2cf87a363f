"""``traingrid doctor``'s network check: the VPC, the training subnets and their way out to
AWS's APIs in every region (a NAT gateway), and the database's subnets' zones."""

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
    yield from _database_subnets(needs, aws)
    yield from _routes_to_aws(needs, aws)


def _database_subnets(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """The database the stack creates takes DatabaseSubnetIds: in the VPC, and in two
    Availability Zones at least, or RDS refuses its DB subnet group ("Subnets in the DB
    subnet group should cover at least two Availability Zones unless there is only one
    Availability Zone": DBSubnetGroupDoesNotCoverEnoughAZs, botocore rds)."""
    if not needs.creates_database:
        return
    name = "network"
    wanted = needs.database_subnet_ids
    if not wanted:
        yield Finding(name, BLOCKER, (
            "DatabaseSubnetIds is not given: the campaign database needs subnets of the VPC "
            "in two Availability Zones (--parameter DatabaseSubnetIds=subnet-…,subnet-…)"))
        return
    found = {s["SubnetId"]: s for s in aws.pages(
        "ec2", "describe_subnets", "Subnets",
        Filters=[{"Name": "subnet-id", "Values": wanted}])}
    problems = [f"subnet {s} does not exist in {needs.region}" for s in wanted
                if s not in found]
    problems += [f"subnet {s} is in {found[s]['VpcId']}, not in VpcId {needs.vpc_id}"
                 for s in wanted if s in found and found[s]["VpcId"] != needs.vpc_id]
    zones = sorted({found[s]["AvailabilityZone"] for s in wanted if s in found})
    if len(zones) < 2:
        problems.append(f"they cover {len(zones)} Availability Zone"
                        f"{'' if len(zones) == 1 else 's'} ({', '.join(zones) or 'none'}); "
                        "RDS refuses a DB subnet group in fewer than two "
                        "(DBSubnetGroupDoesNotCoverEnoughAZs)")
    if problems:
        yield Finding(name, BLOCKER, (
            "DatabaseSubnetIds: " + "; ".join(problems) + ". Deploy with subnets of the VPC "
            "in two zones or more"))
    else:
        yield Finding(name, OK, f"DatabaseSubnetIds cover {', '.join(zones)}")


# A private subnet's way out to the internet through an address translator.
NAT_TARGETS = ("NatGatewayId",)
# Other default routes that may reach the internet, which the doctor cannot follow.
OTHER_EGRESS_TARGETS = ("TransitGatewayId", "InstanceId", "NetworkInterfaceId")
# The functions in the training subnets that call other regions' APIs.
CROSS_REGION_CALLERS = "the janitor and RegisterDataset (SageMaker and S3 of the campaign regions)"


def _routes_to_aws(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """The functions in the training subnets (the API, the database's) call AWS's APIs, and
    the janitor and RegisterDataset call SageMaker and S3 in other regions. A gateway or
    interface endpoint serves its own region ("Endpoints are supported within the same Region
    only", AWS PrivateLink guide); cross-region interface endpoints exist only for the
    services the guide lists under "Cross-region enabled AWS services" (S3, ECR, KMS,
    Lambda…), and SageMaker's API is not one: each subnet needs a default route (0.0.0.0/0)
    to a NAT gateway. Endpoints only keep in-region calls off it."""
    tables = list(aws.pages("ec2", "describe_route_tables", "RouteTables",
                            Filters=[{"Name": "vpc-id", "Values": [needs.vpc_id]}]))
    main = next((t for t in tables if any(a.get("Main") for a in t.get("Associations", []))),
                None)
    stranded, other = [], []
    for subnet_id in needs.subnet_ids:
        table = next((t for t in tables if any(a.get("SubnetId") == subnet_id
                                               for a in t.get("Associations", []))), main)
        defaults = [r for r in (table.get("Routes", []) if table else [])
                    if r.get("DestinationCidrBlock") == "0.0.0.0/0"
                    and r.get("State", "active") == "active"]
        if any(r.get(k) for r in defaults for k in NAT_TARGETS):
            continue
        if any(r.get(k) for r in defaults for k in OTHER_EGRESS_TARGETS):
            other.append(subnet_id)
        else:
            stranded.append(subnet_id)
    if stranded:
        endpoints = sorted({e["ServiceName"].rsplit(".", 1)[-1] for e in aws.pages(
            "ec2", "describe_vpc_endpoints", "VpcEndpoints",
            Filters=[{"Name": "vpc-id", "Values": [needs.vpc_id]}])})
        having = (f" (the VPC's endpoints for {', '.join(endpoints)} serve this region "
                  "only)" if endpoints else "")
        yield Finding("network", BLOCKER, (
            f"subnet(s) {', '.join(stranded)} have no default route to a NAT gateway: "
            f"{CROSS_REGION_CALLERS} call other regions' APIs, which no VPC endpoint "
            f"serves{having}. Add a route 0.0.0.0/0 to a NAT gateway to their route table"))
    if other:
        yield Finding("network", WARNING, (
            f"subnet(s) {', '.join(other)} route 0.0.0.0/0 through a transit gateway, "
            f"instance or interface, not a NAT gateway: make sure it reaches the internet, "
            f"for {CROSS_REGION_CALLERS}"))
    if not stranded and not other:
        yield Finding("network", OK, (
            "the training subnets route 0.0.0.0/0 to a NAT gateway (AWS's APIs, other "
            "regions' too)"))
