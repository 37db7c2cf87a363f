"""``traingrid doctor`` for a stack on the EKS backend (EksClusterName): the cluster it names
must exist in the region, be ACTIVE on a Kubernetes version Batch runs jobs on, sit in the
training subnets' VPC; Batch's access and the Pod Identity add-on are checked where the EKS
API serves them (the emulator's does not: those are warnings that name the call)."""

from __future__ import annotations

from typing import Any

from tests.cli.test_doctor import HOME, account, lines  # noqa: F401 - the fixture

CLUSTER = "gpu-fleet"


def make_cluster(account: Any, version: str = "1.31", vpc: str | None = None) -> None:  # noqa: F811
    ec2 = account.client("ec2")
    if vpc is None:
        subnets = account.subnets
    else:
        subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.40.1.0/24",
                                     AvailabilityZone=f"{HOME}a")["Subnet"]["SubnetId"]]
    account.client("eks").create_cluster(
        name=CLUSTER, version=version, roleArn="arn:aws:iam::123456789012:role/eks-cluster",
        resourcesVpcConfig={"subnetIds": subnets})


# What a stack on the cluster is deployed with besides its name (the healthy account's VPC).
PINNED = ("--parameter", "EksKubernetesVersion=1.31", "--parameter", "VpcCidr=10.30.0.0/16")


def eks_lines(result: Any, status: str) -> list[str]:
    return [line for line in lines(result, status) if line.split()[1] == "eks"]


def test_a_cluster_that_is_not_there_is_a_blocker_and_an_ecs_stack_has_none(account):  # noqa: F811
    ecs = account.healthy().doctor()
    assert not any(line.split()[1:2] == ["eks"] for line in ecs.stdout.splitlines()
                   if line.strip())
    result = account.doctor("--parameter", f"EksClusterName={CLUSTER}")
    assert result.exit_code == 1
    (blocker,) = eks_lines(result, "BLOCKER")
    assert f"no EKS cluster {CLUSTER} in {HOME}" in blocker and "docs/eks.md" in blocker


def test_an_active_cluster_in_the_vpc_passes_and_what_the_api_cannot_say_warns(account):  # noqa: F811
    make_cluster(account.healthy())
    result = account.doctor("--parameter", f"EksClusterName={CLUSTER}", *PINNED)
    assert eks_lines(result, "BLOCKER") == [], result.stdout
    assert any(f"EKS cluster {CLUSTER}: ACTIVE, Kubernetes 1.31" in line
               for line in eks_lines(result, "ok"))
    # aws-auth only (the emulated cluster's default): a reminder of the mapping Batch needs.
    assert any("aws-auth" in line and "AWSServiceRoleForBatch" in line
               for line in eks_lines(result, "warning"))


def test_an_old_kubernetes_or_another_vpc_is_a_blocker(account):  # noqa: F811
    account.healthy()
    other = account.client("ec2").create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    make_cluster(account, version="1.24", vpc=other)
    result = account.doctor("--parameter", f"EksClusterName={CLUSTER}")
    blockers = eks_lines(result, "BLOCKER")
    assert any("Kubernetes 1.24" in line and "upgrade" in line for line in blockers)
    assert any(f"is in {other}" in line for line in blockers)


def test_nodes_pinned_to_another_kubernetes_or_dns_outside_the_vpc_are_blockers(account):  # noqa: F811
    make_cluster(account.healthy(), version="1.31")
    result = account.doctor("--parameter", f"EksClusterName={CLUSTER}",
                            "--parameter", "EksKubernetesVersion=1.33",
                            "--parameter", "VpcCidr=192.168.0.0/16")
    blockers = eks_lines(result, "BLOCKER")
    assert any("EksKubernetesVersion is 1.33" in line and "EksKubernetesVersion=1.31" in line
               for line in blockers), result.stdout
    assert any("VpcCidr is 192.168.0.0/16" in line and "VpcCidr=10.30.0.0/16" in line
               and "CoreDNS" in line for line in blockers), result.stdout
    unpinned = account.doctor("--parameter", f"EksClusterName={CLUSTER}")
    assert any("EksKubernetesVersion is empty" in line
               for line in eks_lines(unpinned, "BLOCKER"))
