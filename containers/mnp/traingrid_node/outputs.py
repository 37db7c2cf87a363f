"""The run's outputs: an index of every file, the export to S3 through the file system's
data repository, and a tar archive of them."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from traingrid_node.config import (
    EXPORT_BATCH,
    EXPORT_POLL_INTERVAL,
    OUTPUT_INDEX,
    ArchiveConfig,
    ExportConfig,
    NodeConfig,
    PreloadConfig,
)
from traingrid_node.status import EXIT_ARCHIVE, log


def archive_outputs(archive: ArchiveConfig) -> Path:
    """tar.gz the output directory into the archive directory (atomically renamed)."""
    if not archive.output_dir.is_dir():
        raise FileNotFoundError(f"output directory {archive.output_dir} does not exist")
    archive.archive_dir.mkdir(parents=True, exist_ok=True)
    target = archive.path
    tmp = target.with_name(f".{target.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(archive.output_dir, arcname=archive.output_dir.name or "output")
    tmp.replace(target)
    return target


def archive_if_configured(cfg: NodeConfig, status: int) -> int:
    if cfg.archive is None:
        return status
    try:
        target = archive_outputs(cfg.archive)
    except (OSError, tarfile.TarError) as exc:
        log(f"archiving {cfg.archive.output_dir} failed: {exc}")
        return EXIT_ARCHIVE if status == 0 else status
    log(f"archived {cfg.archive.output_dir} to {target}")
    return status


def write_output_index(output_dir: Path) -> list[Path]:
    """Write OUTPUT_INDEX (every output's path and size) and return the files to export.

    Written after the launcher exits, so it lists what the run left behind; whoever deletes
    the file system checks S3 against it."""
    index = output_dir / OUTPUT_INDEX
    tmp = index.with_name(f".{index.name}.tmp")
    files = sorted(p for p in output_dir.rglob("*") if p.is_file() and p not in (index, tmp))
    entries = [{"path": p.relative_to(output_dir).as_posix(), "size": p.stat().st_size}
               for p in files]
    tmp.write_text(json.dumps({"files": entries}, indent=1) + "\n")
    tmp.replace(index)
    return [*files, index]


def _lfs(export: ExportConfig | PreloadConfig, action: str, files: Sequence[Path]) -> str:
    """Run ``lfs <action>`` over the files in batches; the combined standard output."""
    out = []
    for start in range(0, len(files), EXPORT_BATCH):
        batch = [str(f) for f in files[start:start + EXPORT_BATCH]]
        result = subprocess.run([*export.lfs, action, *batch], capture_output=True, text=True,
                                timeout=120, check=False)
        if result.returncode != 0:
            raise OSError(f"{export.lfs[0]} {action} exited {result.returncode}: "
                          f"{result.stderr.strip()[-300:]}")
        out.append(result.stdout)
    return "".join(out)


def _hsm_until_done(config: ExportConfig | PreloadConfig, files: Sequence[Path], request: str,
                    query: str, done: Callable[[str], set[str]],
                    timeout: float) -> tuple[int, int]:
    """``lfs <request>`` every file, then ``lfs <query>`` the rest until ``done`` says each
    is done or the timeout passes: (done, total)."""
    _lfs(config, request, files)
    deadline = time.monotonic() + timeout
    waiting = [str(f) for f in files]
    while True:
        waiting = sorted(set(waiting) - done(_lfs(config, query, [Path(f) for f in waiting])))
        if not waiting or time.monotonic() >= deadline:
            return len(files) - len(waiting), len(files)
        time.sleep(EXPORT_POLL_INTERVAL)


def _archived(state_output: str) -> set[str]:
    """Files that ``lfs hsm_state`` reports archived and unchanged since (not dirty)."""
    done = set()
    for line in state_output.splitlines():
        path, sep, flags = line.rpartition(": ")
        words = set(re.split(r"[\s,]+", flags))
        if sep and "archived" in words and "dirty" not in words:
            done.add(path)
    return done


def archive_now(export: ExportConfig | None, files: Sequence[Path]) -> str | None:
    """Ask Lustre to archive these files to the S3 data repository now (``lfs hsm_archive``
    queues the copy and returns), so a checkpoint reaches S3 while the job trains and outlives
    its host. Files outside the export folder are left alone. An error message, or None."""
    if export is None:
        return None
    inside = [f for f in files if f.resolve().is_relative_to(export.output_dir.resolve())]
    try:
        if inside:
            _lfs(export, "hsm_archive", inside)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None


def export_outputs(export: ExportConfig) -> tuple[int, int]:
    """Ask Lustre to archive every output to the S3 data repository (``lfs hsm_archive``)
    and wait until each is archived or the timeout passes: (archived, total)."""
    files = write_output_index(export.output_dir)
    return _hsm_until_done(export, files, "hsm_archive", "hsm_state", _archived, export.timeout)


def export_if_configured(cfg: NodeConfig) -> None:
    """Export on exit never changes the job's status: whatever is not in S3 by then, the
    state machine's export task copies before the file system goes."""
    if cfg.export is None:
        return
    if not cfg.export.output_dir.is_dir():
        log(f"nothing to export: {cfg.export.output_dir} does not exist")
        return
    started = time.monotonic()
    try:
        archived, total = export_outputs(cfg.export)
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"exporting {cfg.export.output_dir} failed: {exc}")
        return
    took = time.monotonic() - started
    if archived < total:
        log(f"exported {archived} of {total} output file(s) in {took:.0f}s; "
            "the rest is left to the export task")
    else:
        log(f"exported {total} output file(s) to the data repository in {took:.1f}s")


def _restored(action_output: str) -> set[str]:
    """Files ``lfs hsm_action`` reports no action on (NOOP): their contents are loaded."""
    done = set()
    for line in action_output.splitlines():
        path, sep, action = line.rpartition(": ")
        if sep and action.split()[:1] == ["NOOP"]:
            done.add(path)
    return done


def preload_dataset(preload: PreloadConfig) -> tuple[int, int]:
    """Ask Lustre to load every dataset file's contents from S3 now (``lfs hsm_restore``
    queues them; the file servers load them in parallel) and wait until each is loaded or
    the timeout passes: (loaded, total)."""
    skip = [d.resolve() for d in preload.skip_dirs]
    files = sorted(p for p in preload.dataset_dir.rglob("*") if p.is_file()
                   and not any(p.resolve().is_relative_to(d) for d in skip))
    return _hsm_until_done(preload, files, "hsm_restore", "hsm_action", _restored,
                           preload.timeout)


def preload_if_configured(cfg: NodeConfig) -> None:
    """Preloading never fails the job: a file not loaded yet is loaded on its first read."""
    if cfg.preload is None:
        return
    started = time.monotonic()
    try:
        loaded, total = preload_dataset(cfg.preload)
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"preloading {cfg.preload.dataset_dir} failed: {exc}; files load on first read")
        return
    took = time.monotonic() - started
    rest = "" if loaded == total else "; the rest load on first read"
    log(f"preloaded {loaded} of {total} dataset file(s) from S3 in {took:.1f}s{rest}")
