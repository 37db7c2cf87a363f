"""``traingrid doctor``'s network check: the VPC, the training subnets and their way out to
AWS's APIs in every region (a NAT gateway), and the database's subnets' zones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from traingrid_local.doctor.findings import BLOCKER, OK, WARNING, Aws, AwsError, Finding
from traingrid_local.doctor.needs import Needs


def _branches(value: Any) -> Iterator[Any]:
    """What a template value may be: both branches of an ``Fn::If``, items of a list."""
    if isinstance(value, dict) and "Fn::If" in value:
        for branch in value["Fn::If"][1:]:
            yield from _branches(branch)
    elif isinstance(value, list):
        for item in value:
            yield from _branches(item)
    elif isinstance(value, dict) and value != {"Ref": "AWS::NoValue"}:
        yield value


def _interfaces(needs: Needs, instance_type: str) -> list[dict[str, Any]]:
    """The network interfaces the launch template of ``instance_type``'s nodes declares (a
    compute environment's override for it); none: the instance's own one."""
    templates = needs.resources_of("AWS::EC2::LaunchTemplate")
    for environment in needs.resources_of("AWS::Batch::ComputeEnvironment").values():
        launch = (environment.get("Properties", {}).get("ComputeResources", {})
                  .get("LaunchTemplate") or {})
        for override in _branches(launch.get("Overrides", [])):
            if instance_type in override.get("TargetInstanceTypes", []):
                name = (override.get("LaunchTemplateId") or {}).get("Ref", "")
                data = templates.get(name, {}).get("Properties", {}).get(
                    "LaunchTemplateData", {})
                return list(_branches(data.get("NetworkInterfaces", [])))
    return []


def addresses_per_node(needs: Needs, instance_type: str) -> tuple[int, str]:
    """The private addresses one node of ``instance_type`` takes in its subnet, and why: each
    interface its launch template gives it that has an address (an EFA-only one has none;
    without interfaces, the instance's one), and on ECS its multi-node task's own interface
    (awsvpc)."""
    interfaces = _interfaces(needs, instance_type)
    addressed = (sum(1 for i in interfaces if i.get("InterfaceType") != "efa-only")
                 if interfaces else 1)
    why = (f"{addressed} interface(s) with an address" +
           (f" of {len(interfaces)}" if interfaces and len(interfaces) != addressed else ""))
    if not needs.parameters.get("EksClusterName"):
        return addressed + 1, why + " and the multi-node task's own"
    return addressed, why


def network(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """The VPC and the training subnets: they exist, in that VPC, and the first, where every
    node launches (and a cluster placement group keeps a job's nodes), has the addresses
    every node takes."""
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
    # Every node launches in the first training subnet (the compute environments' Subnets,
    # the file systems' subnet), and a multi-node task's interface is "created in the same VPC
    # subnet as its host compute resource" (AWS Batch User Guide): its free addresses count.
    first = subnets[needs.subnet_ids[0]]
    zone, free = first["AvailabilityZone"], int(first["AvailableIpAddressCount"])
    cidrs = ", ".join(a["CidrBlock"] for a in vpc.get("CidrBlockAssociationSet", [])
                      ) or vpc.get("CidrBlock", "")
    summary = (f"VPC {needs.vpc_id} ({cidrs}); the first training subnet {first['SubnetId']} "
               f"({zone}), where every node launches, has {free} free addresses")
    # The type whose nodes take the most addresses (a run may ask for any the stack allows).
    per_node, why, widest = max(
        ((*addresses_per_node(needs, t), t) for t in needs.instance_types or ["a node"]),
        key=lambda found: found[0])
    needed = needs.nodes * per_node
    takes = (f"{needs.nodes} × {widest} nodes take {needed} addresses "
             f"({per_node} a node: {why})")
    if free < needed:
        yield Finding(name, BLOCKER, (
            f"{summary}; {takes}: put a larger subnet first in TrainingSubnetIds, or run fewer "
            "nodes"))
    else:
        yield Finding(name, OK, f"{summary} ≥ {needed}: {takes}")
    yield from _database_subnets(needs, aws)
    yield from _routes_to_aws(needs, aws)
    yield from _default_group(needs, aws)


def _efa_tasks_on_ecs(needs: Needs) -> bool:
    """The stack launches types with interfaces of their own (EFA) on ECS: their multi-node
    tasks' interfaces get the VPC's default group (their compute environment names none)."""
    return not needs.parameters.get("EksClusterName") and any(
        _interfaces(needs, t) for t in needs.instance_types)


def _default_group(needs: Needs, aws: Aws) -> Iterator[Finding]:
    """On EFA nodes, Batch gives a multi-node task's interface the VPC's default group: the
    stack must be told which it is (VpcDefaultSecurityGroupId), and the nodes meet only if it
    lets all traffic in from itself and out (AWS creates it so; many accounts take its rules
    away)."""
    if not _efa_tasks_on_ecs(needs):
        return
    name = "network"
    groups = list(aws.pages("ec2", "describe_security_groups", "SecurityGroups", Filters=[
        {"Name": "vpc-id", "Values": [needs.vpc_id]},
        {"Name": "group-name", "Values": ["default"]}]))
    if not groups:
        return
    group = groups[0]
    given = needs.parameters.get("VpcDefaultSecurityGroupId", "")
    if given != group["GroupId"]:
        yield Finding(name, BLOCKER, (
            f"VpcDefaultSecurityGroupId is {given or 'not given'}; deploy with "
            f"VpcDefaultSecurityGroupId={group['GroupId']}, the default security group of "
            f"{needs.vpc_id}: Batch gives it to the multi-node tasks on EFA nodes, and the "
            "stack lets it reach the file systems"))
    problems = []

    def everything(rule: dict[str, Any]) -> bool:
        return str(rule.get("IpProtocol")) == "-1"

    def from_itself(rule: dict[str, Any]) -> bool:
        return any(pair.get("GroupId") == group["GroupId"]
                   for pair in rule.get("UserIdGroupPairs", []))

    if not any(everything(r) and from_itself(r) for r in group.get("IpPermissions", [])):
        problems.append("all traffic in from itself")
    if not any(everything(r) and (from_itself(r) or any(
            a.get("CidrIp") == "0.0.0.0/0" for a in r.get("IpRanges", [])))
            for r in group.get("IpPermissionsEgress", [])):
        problems.append("all traffic out")
    if problems:
        yield Finding(name, BLOCKER, (
            f"the default security group {group['GroupId']} of {needs.vpc_id} does not allow "
            f"{' or '.join(problems)}: the multi-node tasks on EFA nodes are in it (Batch "
            "gives it to them when the compute environment names no group) and could not "
            "meet. Add those rules (the rules AWS creates it with)"))
    else:
        yield Finding(name, OK, (
            f"default security group {group['GroupId']} allows all traffic within itself: "
            "the multi-node tasks on EFA nodes meet there"))


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
