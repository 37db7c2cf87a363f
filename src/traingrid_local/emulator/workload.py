"""What the emulated training container does: it writes its outputs to the run's FSx file
system, as the real job writes to ``$OUTPUT_DIR`` on the Lustre mount.

The outputs are small stand-ins with the trainer's names (its newest checkpoints, the final
weights, the main node's log) and its ``metrics.json``, honouring the one contract of
``traingrid_node.metrics``: enough for the archive, its verification and its manifest to work on
real files. Like the trainer, a job resumes from the newest checkpoint an earlier attempt left on
the file system, and each checkpoint reaches S3 as it is written (``lfs hsm_archive``), even
when the job's host is lost later. Like the entrypoint, the main node then writes the outputs'
index and exports everything to S3 before the job ends.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from moto.fsx.models import fsx_backends

from traingrid.training.archive import OUTPUT_INDEX
from traingrid.training.attempts import newest_checkpoint
from traingrid.vocabulary.catalog import (
    GPU_IMAGES_PER_S,
    INSTANCE_TYPES,
    NETWORK_GBPS,
    loader_shared_memory_mib,
)
from traingrid_local.emulator import batch_nodes, fault_injection, fsx, training_curves
from traingrid_node.metrics import (
    CHECKPOINT_DIR,
    CHECKPOINT_NAME,
    FINAL_MODEL,
    METRICS_FILE,
    metrics_document,
)
from traingrid_node.preflight import PREFLIGHT_FILE, Thresholds, verdict
from traingrid_node.status import EXIT_MOUNT

# The seed's throughput: ~100k images/s on 160 V100s.
IMAGES_PER_SECOND_PER_GPU = 625
IMAGENET_TRAIN_IMAGES = 1_281_167
KEPT_CHECKPOINTS = 3  # as the trainer keeps them
CHECKPOINT_BYTES = 16 * 1024
# Docker's /dev/shm when the job definition sets no LinuxParameters.SharedMemorySize.
DOCKER_SHM_MIB = 64
# The pre-flight check's figures: the trainer's synthetic-data rate a rank, its all-reduce bus
# bandwidth and reads; under ``slow-node`` one GPU of one node runs at a fifth of the rest.
# A node's ranks train at the seeds' share of their GPU's published rate (625 of a V100's
# 1,200), and the all-reduce reaches 93% of its network (2.9 GB/s of p3.16xlarge's 25 Gbit/s).
PREFLIGHT_SECONDS = 150
PREFLIGHT_BUS_GB_S = 2.9
SEED_GPU_SHARE = IMAGES_PER_SECOND_PER_GPU / GPU_IMAGES_PER_S["V100"]
SEED_BUS_SHARE = PREFLIGHT_BUS_GB_S / (NETWORK_GBPS["p3.16xlarge"] / 8)
PREFLIGHT_READ_MB_S = 180.0
SLOW_SHARE = 0.2
NODE_ADDRESSES = "10.20.0.{}"  # the job's subnet; node i is .{10 + i}
# A loader worker that outgrows /dev/shm dies of SIGBUS; its rank's DataLoader then raises
# (exit 1), and mpirun and the entrypoint pass that on.
BUS_ERROR_EXIT_CODE = 1


def _file_system_by_dns(account_id: str, region: str, dns_name: str) -> Any:
    for fs in fsx_backends[account_id][region].file_systems.values():
        if fs.dns_name == dns_name:
            return fs
    return None


# The nodes' Lustre client: the host kernel's module (Batch's Amazon Linux 2023 AMIs,
# ECS_AL2023_NVIDIA and EKS_AL2023_NVIDIA) and the node image's mount.lustre (Ubuntu 24.04,
# FSx's noble repository), both Lustre 2.15. FSx for Lustre User Guide, "Lustre file system
# and client kernel compatibility": Amazon Linux 2023 and Ubuntu 24.04 clients are not
# compatible with 2.10 file systems (FSx's default version, catalog.LUSTRE_VERSION).
LUSTRE_CLIENT = "Amazon Linux 2023 / Ubuntu 24.04 (Lustre 2.15 client)"
UNMOUNTABLE_LUSTRE_VERSIONS = frozenset({"2.10"})
MOUNT_FAILS_AFTER_SECONDS = 30  # the node program's mount, before anything else
MOUNT_EXIT_CODE = EXIT_MOUNT


def mount_refusal(account_id: str, region: str, env: dict[str, str]) -> str | None:
    """Why the node program's mount of the run's file system fails on every node, if it does:
    its Lustre client cannot mount the file system's Lustre version."""
    fs = _file_system_by_dns(account_id, region, env.get("FSX_DNS_NAME", ""))
    if fs is None:
        return None
    version = fsx.type_version(fs)
    if version not in UNMOUNTABLE_LUSTRE_VERSIONS:
        return None
    return (f"mount of {fs.dns_name}@tcp:/{env.get('FSX_MOUNT_NAME', '?')} failed: a "
            f"{LUSTRE_CLIENT} cannot mount a Lustre {version} file system (FSx for Lustre "
            "User Guide, \"Lustre file system and client kernel compatibility\"); create it "
            "with FileSystemTypeVersion 2.15")


def _number(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    return int(raw) if raw.isdigit() else default


def shared_memory_shortfall(env: dict[str, str], command: Sequence[str], num_nodes: int,
                            shm_mib: int) -> str | None:
    """The trainer's error when its data loaders need more /dev/shm than the container has
    (PyTorch's workers hand every batch to their rank through it), else None. Other commands
    are not the trainer, and are not judged."""
    if not any("traingrid_trainer" in part for part in command):
        return None
    ranks = max(_number(env, "MPI_GPUS", 0) // max(num_nodes, 1), 1)
    needed = loader_shared_memory_mib(ranks, _number(env, "BATCH_SIZE", 256))
    if needed <= shm_mib:
        return None
    return (f"ERROR: Unexpected bus error encountered in worker. This might be caused by "
            f"insufficient shared memory (shm). RuntimeError: DataLoader worker is killed by "
            f"signal: Bus error. (the data loaders of {ranks} ranks need {needed} MiB, "
            f"/dev/shm has {shm_mib} MiB)")


def preflight_document(env: dict[str, str], num_nodes: int, *,
                       slow: bool) -> dict[str, Any]:
    """What the trainer's pre-flight check writes: every rank's figures and the verdict on
    them (``traingrid_node.preflight``, as the trainer judges them). ``slow``: the first GPU
    of the middle node is throttled."""
    nodes = max(num_nodes, 1)
    per_node = max(_number(env, "MPI_GPUS", nodes) // nodes, 1)
    thresholds = Thresholds.from_env(env)
    slow_rank = nodes // 2 * per_node if slow else None
    instance = INSTANCE_TYPES.get(thresholds.instance_type)
    gpu_rate = (instance.gpu_images_per_s * SEED_GPU_SHARE if instance
                else IMAGES_PER_SECOND_PER_GPU)
    bus_gb_s = (round(NETWORK_GBPS[instance.name] / 8 * SEED_BUS_SHARE, 1) if instance
                else PREFLIGHT_BUS_GB_S)
    ranks = []
    for rank in range(nodes * per_node):
        rate = gpu_rate * (1 + (rank % 7 - 3) / 100)
        ranks.append({"rank": rank, "address": NODE_ADDRESSES.format(10 + rank // per_node),
                      "host": f"ip-10-20-0-{10 + rank // per_node}",
                      "images_per_s": round(rate * (SLOW_SHARE if rank == slow_rank else 1), 1),
                      "read_mb_s": PREFLIGHT_READ_MB_S, "read_mb": thresholds.read_mb})
    problems = verdict(ranks, bus_gb_s, thresholds)
    return {"passed": not problems,
            "cause": "pre-flight check failed: " + "; ".join(problems) if problems else None,
            "problems": problems, "notes": [], "world_size": len(ranks),
            "batch_size": _number(env, "BATCH_SIZE", 256), "image_size": 224,
            "allreduce_bus_gb_s": bus_gb_s, "allreduce_mib": thresholds.allreduce_mib,
            "ranks": ranks, "thresholds": asdict(thresholds), "seconds": PREFLIGHT_SECONDS}


def resumable(files: dict[str, bytes], root: str) -> tuple[int, str | None]:
    """(epoch, path relative to the output folder) of the newest checkpoint on the file
    system under ``root``; (0, None) when there is none."""
    prefix = f"{root}/{CHECKPOINT_DIR}/"
    path = newest_checkpoint(list(files), prefix)
    if path is None:
        return 0, None
    found = CHECKPOINT_NAME.fullmatch(path.removeprefix(prefix))
    return (int(found.group(1)) if found else 0), path.removeprefix(f"{root}/")


def outputs(env: dict[str, str], *, succeeded: bool, exit_code: int | None,
            ran_seconds: float, command: Sequence[str] = (), resumed_epoch: int = 0,
            resumed_from: str | None = None, error: str | None = None,
            preflight: dict[str, Any] | None = None,
            trained: Any = None) -> dict[str, bytes]:
    """Files (relative to OUTPUT_DIR) a run leaves behind, named as the trainer names them:
    its newest checkpoints, and on success the final weights and ``metrics.json``. A job that
    resumed from an earlier attempt's checkpoint (``resumed_epoch``) goes on from there."""
    gpus = _number(env, "MPI_GPUS", 0)
    epochs, batch = _number(env, "EPOCHS", 90), _number(env, "BATCH_SIZE", 256)
    log = [
        f"mpirun -np {gpus} {env.get('EXTRA_MPI_PARAMS', '')} {shlex.join(command)}",
        f"attempt {env.get('TRAINGRID_ATTEMPT', '1')}: "
        + (f"resumed from {resumed_from} (epoch {resumed_epoch})" if resumed_from
           else "starting from epoch 0"),
        f"epochs {epochs}, batch size {batch}, {env.get('LR_DECAY_MODE')} decay, "
        f"{env.get('WARMUP_EPOCHS')} warmup epochs",
        f"trained {ran_seconds / 3600:.2f} h at {gpus * IMAGES_PER_SECOND_PER_GPU} images/s",
        *([error] if error else []),
        f"exit code {exit_code}",
    ]
    files = {"logs/main-node.log": ("\n".join(log) + "\n").encode()}
    if preflight is not None:
        files[PREFLIGHT_FILE] = json.dumps(preflight, indent=1).encode()
    if trained is not None and trained.started_at is not None and not error:
        # The trainer trained (``trained``: batch's SimulatedJob): its curves so far.
        files |= training_curves.node_files(
            env, trained.num_nodes, trained.started_at, trained.training_seconds, ran_seconds,
            fault_injection.CURRENT.on("straggler"))
    recoveries = ([batch_nodes.recovery(trained.num_nodes, gpus, _number(env, "BATCH_SIZE", 256),
                                        IMAGES_PER_SECOND_PER_GPU)]
                  if trained is not None and trained.worker_lost
                  and ran_seconds > batch_nodes.LOST_AFTER_SECONDS else [])
    seed = env.get("TRAINGRID_RUN", "run").encode()
    # A trainer that failed with an ``error`` died in its first step, before a checkpoint.
    trained = epochs if succeeded else min(
        epochs, resumed_epoch + (1 if ran_seconds > 0 and not error else 0))
    for epoch in range(max(1, trained - KEPT_CHECKPOINTS + 1), trained + 1):
        digest = hashlib.sha256(seed + epoch.to_bytes(4, "big")).digest()
        files[f"{CHECKPOINT_DIR}/epoch-{epoch:04d}.pt"] = digest * (CHECKPOINT_BYTES // len(digest))
    if succeeded:
        files[FINAL_MODEL] = hashlib.sha256(seed + b"final").digest() * 512
        global_batch = gpus * batch
        document = metrics_document(
            world_size=gpus, device="cuda", epochs=epochs,
            steps=epochs * (IMAGENET_TRAIN_IMAGES // max(global_batch, 1)),
            global_batch=global_batch, images_per_second=gpus * IMAGES_PER_SECOND_PER_GPU,
            epoch_seconds=[ran_seconds / max(epochs, 1)] * epochs, allreduce_ok=True,
            synthetic=False, top1_accuracy=0.759, resumed_from=resumed_from,
            recoveries=recoveries)
        files[METRICS_FILE] = json.dumps(document, indent=1).encode()
    return files


def write_outputs(account_id: str, region: str, env: dict[str, str], *, exports: bool = True,
                  **result: Any) -> int:
    """Write the run's outputs to its file system; returns how many files were written."""
    fs = _file_system_by_dns(account_id, region, env.get("FSX_DNS_NAME", ""))
    if fs is None:
        return 0
    mount = env.get("FSX_MOUNT_POINT", "/fsx").rstrip("/")
    root = env.get("OUTPUT_DIR", f"{mount}/output").removeprefix(mount).strip("/")
    resumed_epoch, resumed = resumable(fs.files, root)
    produced = outputs(env, resumed_epoch=resumed_epoch,
                       resumed_from=f"{mount}/{root}/{resumed}" if resumed else None, **result)
    for name, data in produced.items():
        fs.files[f"{root}/{name}"] = data
    if exports and env.get("TRAINGRID_EXPORT_DIR", "").rstrip("/") == f"{mount}/{root}":
        export_on_exit(account_id, fs, root, produced)
    elif not fault_injection.CURRENT.on("export-failed"):
        # The trainer archived each checkpoint as it wrote it.
        fsx.export_files(account_id, fs, {f"{root}/{name}": data for name, data in produced.items()
                                          if name.startswith(f"{CHECKPOINT_DIR}/")})
    return len(produced)


def export_on_exit(account_id: str, fs: Any, root: str, produced: dict[str, bytes]) -> None:
    """What the entrypoint's export step does on the main node: index the outputs, then
    archive them all to the file system's data repository before the job ends (not under
    ``export-failed``, where S3 refuses the file system's writes)."""
    index = {"files": [{"path": name, "size": len(data)}
                       for name, data in sorted(produced.items())]}
    fs.files[f"{root}/{OUTPUT_INDEX}"] = json.dumps(index, indent=1).encode() + b"\n"
    if fault_injection.CURRENT.on("export-failed"):
        return
    prefix = f"{root}/"
    fsx.export_files(account_id, fs, {p: d for p, d in fs.files.items() if p.startswith(prefix)})
