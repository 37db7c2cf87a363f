"""Where this process stands among the job's ranks, from its launcher's environment.

``mpirun`` (Open MPI) sets ``OMPI_COMM_WORLD_*``; ``torchrun`` sets ``RANK``/``WORLD_SIZE``/
``LOCAL_RANK`` and ``MASTER_ADDR``/``MASTER_PORT``. Under mpirun the ranks meet at the main node
(``TRAINGRID_MAIN_ADDRESS``, forwarded by the node entrypoint, or ``MASTER_ADDR``); on SageMaker,
at the first of its hosts (``SM_HOSTS``: ``algo-1``, where SageMaker's mpirun runs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PORT = 29501  # the node's rendezvous is 29400, torchrun's 29500
LAUNCHER_VARIABLES = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
)


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    local_rank: int
    main_address: str
    port: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def init_method(self) -> str:
        return f"tcp://{self.main_address}:{self.port}"


def _first_sagemaker_host(env: Mapping[str, str]) -> str | None:
    try:
        hosts = json.loads(env.get("SM_HOSTS", "[]"))
    except ValueError:
        return None
    return sorted(hosts)[0] if isinstance(hosts, list) and hosts else None


def detect_world(env: Mapping[str, str]) -> World:
    for rank_var, size_var, local_var in LAUNCHER_VARIABLES:
        if rank_var in env and size_var in env:
            rank, size = int(env[rank_var]), int(env[size_var])
            local_rank = int(env.get(local_var, "0"))
            break
    else:
        rank, size, local_rank = 0, 1, 0
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} is outside a world of {size}")
    address = (env.get("MASTER_ADDR") or env.get("TRAINGRID_MAIN_ADDRESS")
               or _first_sagemaker_host(env) or "127.0.0.1")
    port = int(env.get("MASTER_PORT") or env.get("TRAINGRID_TRAINER_PORT") or DEFAULT_PORT)
    return World(rank, size, local_rank, address, port)
