"""EFA on the instance types that have it (p3dn, p4d, p5): the devices the container must see,
and what libfabric and NCCL (through aws-ofi-nccl) need to use them.

The plan says how many EFA interfaces the instance type has (``TRAINGRID_EFA_DEVICES``) and
whether they do RDMA reads (``TRAINGRID_EFA_RDMA``). The job's container is privileged, so it
sees every host device, ``/dev/infiniband/uverbs<N>`` included; a node that sees fewer than the
type has stops at once (NCCL would otherwise fall back to TCP, ~8x slower, without a word).
Variables the job already sets win; ``FI_*``/``NCCL_*`` reach every rank (``mpirun -x``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from traingrid_node.config import DEFAULT_DEV_DIR, NodeConfig, _get
from traingrid_node.status import FabricError


def efa_devices_present(dev_dir: Path) -> int:
    found = dev_dir / "infiniband"
    return len(list(found.glob("uverbs*"))) if found.is_dir() else 0


def check_efa_devices(cfg: NodeConfig, env: Mapping[str, str]) -> str:
    """A line for the log; raises when the container sees fewer EFA devices than expected."""
    if cfg.efa_devices == 0:
        return "no EFA on this instance type: NCCL and MPI use TCP"
    dev_dir = Path(_get(env, "TRAINGRID_DEV_DIR") or DEFAULT_DEV_DIR)
    present = efa_devices_present(dev_dir)
    if present < cfg.efa_devices:
        raise FabricError(
            f"the instance type has {cfg.efa_devices} EFA interface(s) but the container sees "
            f"{present} in {dev_dir}/infiniband: check the launch template's interfaces and "
            f"that the job is privileged")
    return f"EFA: {present} device(s); libfabric provider efa" + (
        ", RDMA reads" if cfg.efa_rdma else "")


def fabric_environment(cfg: NodeConfig, env: Mapping[str, str]) -> dict[str, str]:
    """libfabric's settings for EFA; nothing on a type without it."""
    if cfg.efa_devices == 0:
        return {}
    wanted = {
        "FI_PROVIDER": "efa",
        # PyTorch's data loader forks; libfabric must register memory fork-safely.
        "FI_EFA_FORK_SAFE": "1",
    }
    if cfg.efa_rdma:
        wanted["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return {name: value for name, value in wanted.items() if name not in env}
