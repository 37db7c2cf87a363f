"""A Horovod-style script on a region's campaign job, through SageMaker's own MPI launch.

SageMaker's toolkit starts the job's ``traingrid_train.py`` once per GPU on every host as
``mpirun ... python -m mpi4py traingrid_train.py --num_epochs 90 ...`` (the job's
hyperparameters as flags). A script of your own goes in an image of your own in place of
TrainGrid's, and a fan-out request names its tag for the region::

    FROM <account>.dkr.ecr.<region>.amazonaws.com/traingrid-sagemaker:<version>
    COPY horovod_world.py /opt/ml/code/traingrid_train.py

This one reads the MPI world as Horovod does (``hvd.rank()``, ``hvd.size()`` and
``hvd.local_rank()`` are Open MPI's ``OMPI_COMM_WORLD_*`` under mpirun), checks it against MPI
itself (mpi4py, which the launch has already started), sums the ranks over it, and rank 0
writes what it saw to ``world.json`` in the model folder (``SM_MODEL_DIR``), which SageMaker
uploads. Replace the sum with your training loop.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path


def horovod_world(env: Mapping[str, str]) -> tuple[int, int, int]:
    """(rank, size, local rank) from the launcher's variables, as Horovod reads them."""
    rank = env.get("OMPI_COMM_WORLD_RANK", env.get("RANK"))
    size = env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE"))
    local = env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("LOCAL_RANK"))
    if rank is None or size is None or local is None:
        raise SystemExit("horovod_world: not started by mpirun (no OMPI_COMM_WORLD_RANK, "
                         "OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK)")
    return int(rank), int(size), int(local)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "."))
    # The job's other hyperparameters (--num_epochs, --batch_size, ...) arrive too.
    args, _ = parser.parse_known_args(argv)
    rank, size, local_rank = horovod_world(os.environ)

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if (comm.Get_rank(), comm.Get_size()) != (rank, size):
        print(f"rank {rank} of {size} by the environment, {comm.Get_rank()} of "
              f"{comm.Get_size()} by MPI", file=sys.stderr)
        comm.Abort(2)
    total = comm.allreduce(rank, op=MPI.SUM)
    seen = comm.gather({"rank": rank, "local_rank": local_rank, "host": socket.gethostname()})
    print(f"rank {rank} of {size} (local {local_rank}): the ranks sum to {total}", flush=True)
    if rank == 0:
        out = Path(args.model_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "world.json").write_text(json.dumps(
            {"world_size": size, "rank_sum": total, "ranks": seen}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
