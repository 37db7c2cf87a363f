"""What the emulated training container does: it writes its outputs to the run's FSx file
system, as the real job writes to ``$OUTPUT_DIR`` on the Lustre mount.

The outputs are small stand-ins with the trainer's names (its newest checkpoints, the final
weights, the main node's log) and its ``metrics.json``, honouring the one contract of
``traingrid_node.metrics``: enough for the archive, its verification and its manifest to work on
real files. Like the entrypoint, the main
node then writes the outputs' index and exports everything to S3 before the job ends.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Sequence
from typing import Any

from moto.fsx.models import fsx_backends

from traingrid.training.archive import OUTPUT_INDEX
from traingrid_local.emulator import faults, fsx
from traingrid_node.metrics import CHECKPOINT_DIR, FINAL_MODEL, METRICS_FILE, metrics_document

# The seed's throughput: ~100k images/s on 160 V100s.
IMAGES_PER_SECOND_PER_GPU = 625
IMAGENET_TRAIN_IMAGES = 1_281_167
KEPT_CHECKPOINTS = 3  # as the trainer keeps them
CHECKPOINT_BYTES = 16 * 1024


def _file_system_by_dns(account_id: str, region: str, dns_name: str) -> Any:
    for fs in fsx_backends[account_id][region].file_systems.values():
        if fs.dns_name == dns_name:
            return fs
    return None


def _number(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    return int(raw) if raw.isdigit() else default


def outputs(env: dict[str, str], *, succeeded: bool, exit_code: int | None,
            ran_seconds: float, command: Sequence[str] = ()) -> dict[str, bytes]:
    """Files (relative to OUTPUT_DIR) a run leaves behind, named as the trainer names them:
    its newest checkpoints, and on success the final weights and ``metrics.json``."""
    gpus = _number(env, "MPI_GPUS", 0)
    epochs, batch = _number(env, "EPOCHS", 90), _number(env, "BATCH_SIZE", 256)
    log = [
        f"mpirun -np {gpus} {env.get('EXTRA_MPI_PARAMS', '')} {shlex.join(command)}",
        f"epochs {epochs}, batch size {batch}, {env.get('LR_DECAY_MODE')} decay, "
        f"{env.get('WARMUP_EPOCHS')} warmup epochs",
        f"trained {ran_seconds / 3600:.2f} h at {gpus * IMAGES_PER_SECOND_PER_GPU} images/s",
        f"exit code {exit_code}",
    ]
    files = {"logs/main-node.log": ("\n".join(log) + "\n").encode()}
    seed = env.get("TRAINGRID_RUN", "run").encode()
    trained = epochs if succeeded else (1 if ran_seconds > 0 else 0)
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
            synthetic=False, top1_accuracy=0.759)
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
    produced = outputs(env, **result)
    for name, data in produced.items():
        fs.files[f"{root}/{name}"] = data
    if exports and env.get("TRAINGRID_EXPORT_DIR", "").rstrip("/") == f"{mount}/{root}":
        export_on_exit(account_id, fs, root, produced)
    return len(produced)


def export_on_exit(account_id: str, fs: Any, root: str, produced: dict[str, bytes]) -> None:
    """What the entrypoint's export step does on the main node: index the outputs, then
    archive them all to the file system's data repository before the job ends (not under
    ``export-failed``, where S3 refuses the file system's writes)."""
    index = {"files": [{"path": name, "size": len(data)}
                       for name, data in sorted(produced.items())]}
    fs.files[f"{root}/{OUTPUT_INDEX}"] = json.dumps(index, indent=1).encode() + b"\n"
    if faults.CURRENT.on("export-failed"):
        return
    prefix = f"{root}/"
    fsx.export_files(account_id, fs, {p: d for p, d in fs.files.items() if p.startswith(prefix)})
