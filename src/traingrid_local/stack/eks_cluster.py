"""The EKS backend in the emulator: the user's cluster a stack with ``EksClusterName`` trains
on, made in the emulated account as a user would have it before deploying, and the stack
parameters that name it (``traingrid demo --backend eks``, the fault matrix's EKS pass)."""

from __future__ import annotations

from traingrid.training.job_shape import Backend
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

DEMO_CLUSTER = "traingrid-demo-gpus"
DEMO_NAMESPACE = "traingrid"
KUBERNETES_VERSION = "1.31"
BACKENDS = tuple(b.value for b in Backend)


def stand_up(emulator: Emulator) -> dict[str, str]:
    """Create the cluster (once per emulated account); the parameters that name it."""
    eks = emulator.client("eks")
    if DEMO_CLUSTER not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name=DEMO_CLUSTER, version=KUBERNETES_VERSION,
            roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/{DEMO_CLUSTER}-cluster",
            resourcesVpcConfig={"subnetIds": []},
            accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
    # The nodes' AMI pinned to the cluster's version; their DNS to CoreDNS in the VPC that
    # emulator.deploy makes (10.20.0.0/16).
    return {"EksClusterName": DEMO_CLUSTER, "EksNamespace": DEMO_NAMESPACE,
            "EksKubernetesVersion": KUBERNETES_VERSION, "VpcCidr": "10.20.0.0/16"}


def backend_problems(backend: str) -> list[str]:
    if backend in BACKENDS:
        return []
    return [f"unknown backend {backend!r} (available: {', '.join(BACKENDS)})"]


def backend_parameters(emulator: Emulator, backend: str) -> dict[str, str]:
    """The stack parameters of a backend: none for ECS (the default), the cluster's for EKS."""
    if Backend(backend) is Backend.ECS:
        return {}
    return stand_up(emulator)
