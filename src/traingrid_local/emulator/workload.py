"""What the emulated training container does: it writes its outputs to the run's FSx file
system, as the real job writes to ``$OUTPUT_DIR`` on the Lustre mount.

The outputs are small stand-ins (a checkpoint, metrics, the main node's log), enough for the
archive, its verification and its manifest to work on real files. Like the entrypoint, the main
node then writes the outputs' index and exports everything to S3 before the job ends.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from moto.fsx.models import fsx_backends

from traingrid.training.archive import OUTPUT_INDEX
from traingrid_local.emulator import faults, fsx

# The seed's throughput: ~100k images/s on 160 V100s.
IMAGES_PER_SECOND_PER_GPU = 625
CHECKPOINT_SHARDS = 8


def _file_system_by_dns(account_id: str, region: str, dns_name: str) -> Any:
    for fs in fsx_backends[account_id][region].file_systems.values():
        if fs.dns_name == dns_name:
            return fs
    return None


def outputs(env: dict[str, str], *, succeeded: bool, exit_code: int | None,
            ran_seconds: float) -> dict[str, bytes]:
    """Files (relative to OUTPUT_DIR) a run leaves behind."""
    gpus = int(env.get("MPI_GPUS", "0") or 0)
    log = [
        f"mpirun -np {gpus} {env.get('EXTRA_MPI_PARAMS', '')} train.py "
        f"--num_epochs {env.get('EPOCHS')} -b {env.get('BATCH_SIZE')} "
        f"--lr_decay_mode {env.get('LR_DECAY_MODE')} --warmup_epochs {env.get('WARMUP_EPOCHS')}",
        f"trained {ran_seconds / 3600:.2f} h at {gpus * IMAGES_PER_SECOND_PER_GPU} images/s",
        f"exit code {exit_code}",
    ]
    files = {"logs/main-node.log": ("\n".join(log) + "\n").encode()}
    seed = env.get("TRAINGRID_RUN", "run").encode()
    if ran_seconds > 0:
        # A sharded checkpoint, as TensorFlow writes it: equal data shards and an index.
        for shard in range(CHECKPOINT_SHARDS):
            name = f"checkpoints/latest.data-{shard:05d}-of-{CHECKPOINT_SHARDS:05d}"
            files[name] = hashlib.sha256(seed + bytes([shard])).digest() * 512
        files["checkpoints/latest.index"] = hashlib.sha256(seed + b"index").digest() * 8
    if succeeded:
        files["model/final.ckpt"] = hashlib.sha256(seed + b"final").digest() * 512
        files["metrics.json"] = json.dumps({
            "epochs": int(env.get("EPOCHS", "0") or 0),
            "gpus": gpus,
            "images_per_second": gpus * IMAGES_PER_SECOND_PER_GPU,
            "top1_accuracy": 0.759,
        }).encode()
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
