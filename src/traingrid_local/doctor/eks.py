"""``traingrid doctor``'s checks of the EKS backend (a stack with ``EksClusterName``): what the
EKS API can say of the user's cluster before Batch is pointed at it (docs/eks.md has the
whole list, and the parts only ``kubectl`` sees: device plugins, the namespace's service
account, RBAC).

- the cluster exists in the stack's region, is ACTIVE, and runs a Kubernetes version Batch
  supports, the one ``EksKubernetesVersion`` pins the nodes' AMI to;
- it is in the VPC of the training subnets (Batch launches the nodes there), and ``VpcCidr``
  (where the nodes may send DNS: CoreDNS's pods) is that VPC's;
- Batch may reach it: with access entries (authentication mode ``API``/``API_AND_CONFIG_MAP``)
  an entry for Batch's service-linked role; with ``CONFIG_MAP`` only, a reminder of the
  ``aws-auth`` mapping, which the AWS API cannot read;
- the EKS Pod Identity agent add-on, through which the nodes' pods get the job role.

A check the API refuses, or that this API does not serve, is a warning naming it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from traingrid_local.doctor.findings import BLOCKER, OK, WARNING, Aws, AwsError, Finding
from traingrid_local.doctor.needs import Needs

CHECK = "eks"
# The oldest Kubernetes version AWS Batch on Amazon EKS runs jobs on (its user guide's list);
# EKS's own standard support ends earlier for some.
OLDEST_KUBERNETES = (1, 27)
BATCH_ROLE = "role/aws-service-role/batch.amazonaws.com/AWSServiceRoleForBatch"
POD_IDENTITY_ADDON = "eks-pod-identity-agent"
GUIDE = "docs/eks.md"


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(".")[:2])
    except ValueError:
        return ()


def _cluster(needs: Needs, aws: Aws, name: str) -> dict[str, Any] | None:
    try:
        return dict(aws.call("eks", "describe_cluster", name=name)["cluster"])
    except AwsError as error:
        if error.code == "ResourceNotFoundException":
            return None
        raise


def eks(needs: Needs, aws: Aws) -> Iterator[Finding]:
    name = needs.parameters.get("EksClusterName", "").strip()
    if not name:
        return  # the ECS backend: nothing of EKS to check
    cluster = _cluster(needs, aws, name)
    if cluster is None:
        yield Finding(CHECK, BLOCKER, (
            f"no EKS cluster {name} in {aws.region}: EksClusterName names an existing cluster "
            f"in the stack's region (create it first, {GUIDE}), or leave it empty to train "
            "on ECS"))
        return
    yield from _state_and_version(cluster, name)
    yield from _pinned_version(cluster, needs, name)
    yield from _network(cluster, needs, aws, name)
    yield from _batch_access(cluster, aws, name)
    yield from _pod_identity(aws, name)


def _state_and_version(cluster: dict[str, Any], name: str) -> Iterator[Finding]:
    status, version = cluster.get("status", "?"), str(cluster.get("version", ""))
    if status != "ACTIVE":
        yield Finding(CHECK, BLOCKER, f"EKS cluster {name} is {status}, not ACTIVE: Batch "
                                      "cannot launch nodes into it until it is")
    if _version(version) < OLDEST_KUBERNETES:
        oldest = ".".join(map(str, OLDEST_KUBERNETES))
        yield Finding(CHECK, BLOCKER, (
            f"EKS cluster {name} runs Kubernetes {version or '?'}; AWS Batch runs jobs on "
            f"{oldest} and later: upgrade the cluster ({GUIDE})"))
    elif status == "ACTIVE":
        yield Finding(CHECK, OK, f"EKS cluster {name}: ACTIVE, Kubernetes {version}")


def _pinned_version(cluster: dict[str, Any], needs: Needs, name: str) -> Iterator[Finding]:
    """Batch launches nodes of ``EksKubernetesVersion``; without it, of "the latest version
    that Batch supports" (Ec2Configuration.imageKubernetesVersion), which may be newer than
    the cluster: Kubernetes supports no kubelet newer than its API server."""
    version = str(cluster.get("version", ""))
    pinned = needs.parameters.get("EksKubernetesVersion", "").strip()
    if pinned != version:
        yield Finding(CHECK, BLOCKER, (
            f"EksKubernetesVersion is {pinned or 'empty'}, EKS cluster {name} runs "
            f"{version or '?'}: deploy with EksKubernetesVersion={version}, the version of "
            f"the node AMI Batch launches ({GUIDE})"))


def _vpc_cidr(needs: Needs, aws: Aws, vpc: str) -> Iterator[Finding]:
    """The nodes' DNS egress (VpcCidr) must reach CoreDNS's pods, which are in the VPC."""
    given = needs.parameters.get("VpcCidr", "").strip()
    described = aws.call("ec2", "describe_vpcs", VpcIds=[vpc])["Vpcs"]
    blocks = [a["CidrBlock"] for v in described
              for a in v.get("CidrBlockAssociationSet", [{"CidrBlock": v.get("CidrBlock")}])
              if a.get("CidrBlock")]
    try:
        network = ipaddress.ip_network(given) if given else None
    except ValueError:
        network = None
    if network is None or not any(network.overlaps(ipaddress.ip_network(b)) for b in blocks):
        yield Finding(CHECK, BLOCKER, (
            f"VpcCidr is {given or 'empty'}, not a range of {vpc} ({', '.join(blocks)}): the "
            "training nodes' pods resolve names (the file system's) through CoreDNS, whose "
            f"pods are in the VPC; deploy with VpcCidr={blocks[0] if blocks else '?'} "
            f"({GUIDE})"))


def _network(cluster: dict[str, Any], needs: Needs, aws: Aws, name: str) -> Iterator[Finding]:
    config = cluster.get("resourcesVpcConfig", {})
    vpc = config.get("vpcId")
    if not vpc and config.get("subnetIds"):  # the VPC of the cluster's subnets
        subnets = aws.call("ec2", "describe_subnets", SubnetIds=config["subnetIds"])["Subnets"]
        vpc = subnets[0]["VpcId"] if subnets else None
    if vpc and needs.vpc_id and vpc != needs.vpc_id:
        yield Finding(CHECK, BLOCKER, (
            f"EKS cluster {name} is in {vpc}, but VpcId/TrainingSubnetIds are in "
            f"{needs.vpc_id}: Batch launches the cluster's nodes in the training subnets, which "
            "must be in the cluster's VPC"))
    elif vpc:
        yield from _vpc_cidr(needs, aws, vpc)


def _batch_access(cluster: dict[str, Any], aws: Aws, name: str) -> Iterator[Finding]:
    mode = cluster.get("accessConfig", {}).get("authenticationMode", "CONFIG_MAP")
    if mode == "CONFIG_MAP":
        yield Finding(CHECK, WARNING, (
            f"EKS cluster {name} authenticates with the aws-auth ConfigMap only, which the AWS "
            "API cannot read: map AWSServiceRoleForBatch (username aws-batch) and the stack's "
            f"node role there, and bind aws-batch's RBAC roles ({GUIDE})"))
        return
    try:
        account = aws.call("sts", "get_caller_identity")["Account"]
        entries = aws.call("eks", "list_access_entries", clusterName=name)["accessEntries"]
    except AwsError as error:
        yield Finding(CHECK, WARNING, f"Batch's access entry not checked: {error.action} "
                                      f"failed: {error.code}: {error.message}")
        return
    if not any(entry.endswith(f":{account}:{BATCH_ROLE}") for entry in entries):
        yield Finding(CHECK, BLOCKER, (
            f"EKS cluster {name} has no access entry for AWS Batch's service-linked role "
            f"(arn:…:iam::{account}:{BATCH_ROLE}): create one with username aws-batch and "
            f"bind its RBAC roles in the namespace ({GUIDE})"))
    else:
        yield Finding(CHECK, OK, f"AWS Batch has an access entry on EKS cluster {name}")


def _pod_identity(aws: Aws, name: str) -> Iterator[Finding]:
    try:
        addons = aws.call("eks", "list_addons", clusterName=name)["addons"]
    except AwsError as error:
        yield Finding(CHECK, WARNING, f"add-ons not checked: {error.action} failed: "
                                      f"{error.code}: {error.message}")
        return
    if POD_IDENTITY_ADDON not in addons:
        yield Finding(CHECK, BLOCKER, (
            f"EKS cluster {name} lacks the {POD_IDENTITY_ADDON} add-on: the nodes' pods get "
            f"the job role (S3 reads and writes) through EKS Pod Identity ({GUIDE})"))


def eks_findings(needs: Needs, aws: Aws) -> list[Finding]:
    """The EKS checks' findings (none for an ECS stack); a refused call, a warning."""
    found: list[Finding] = []
    try:
        found.extend(eks(needs, aws))
    except AwsError as error:
        what = "may not call" if error.denied else "failed calling"
        found.append(Finding(CHECK, WARNING, f"not checked: this identity {what} "
                                             f"{error.action} ({error.code})"))
    return found
