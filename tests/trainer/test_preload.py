"""Preloading the dataset before training: lfs hsm_restore on every dataset file (not the
outputs), then waiting until lfs hsm_action reports each loaded."""

from __future__ import annotations

from pathlib import Path

from traingrid_node.config import parse_config, preload_config
from traingrid_node.outputs import preload_dataset, preload_if_configured

# A stand-in for lfs: hsm_restore marks its files asked for; hsm_action reports a file
# RESTORE until it was asked for and one more hsm_action went by, then NOOP.
FAKE_LFS = """#!/bin/sh
action=$1; shift
for f in "$@"; do
  case $action in
    hsm_restore) echo "$f" >> "{calls}.restore" ;;
    hsm_action)
      if grep -qx "$f" "{calls}.seen" 2>/dev/null; then echo "$f: NOOP"
      else
        grep -qx "$f" "{calls}.restore" 2>/dev/null && echo "$f" >> "{calls}.seen"
        echo "$f: RESTORE running (from 0 to EOF)"
      fi ;;
  esac
done
"""


def dataset(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    data, outputs, calls = tmp_path / "fsx", tmp_path / "fsx" / "outputs", tmp_path / "calls"
    (data / "train").mkdir(parents=True)
    outputs.mkdir()
    for name in ("train/train-00000-of-00002", "train/train-00001-of-00002", "labels.txt"):
        (data / name).write_bytes(b"x" * 10)
    (outputs / "epoch-0001.pt").write_bytes(b"y")
    lfs = tmp_path / "lfs"
    lfs.write_text(FAKE_LFS.format(calls=calls))
    lfs.chmod(0o755)
    env = {"TRAINGRID_PRELOAD_DIR": str(data), "TRAINGRID_EXPORT_DIR": str(outputs),
           "TRAINGRID_LFS": str(lfs), "TRAINGRID_PRELOAD_TIMEOUT": "30"}
    return data, calls, env


def test_every_dataset_file_is_restored_and_waited_for_but_not_the_outputs(tmp_path) -> None:
    data, calls, env = dataset(tmp_path)
    preload = preload_config(env)
    assert preload is not None
    assert preload_dataset(preload) == (3, 3)
    asked = sorted(Path(p) for p in Path(f"{calls}.restore").read_text().split())
    assert asked == sorted(p for p in data.rglob("*") if p.is_file()
                           and "outputs" not in p.parts)


def test_a_preload_that_fails_leaves_the_files_to_load_on_first_read(tmp_path, capfd) -> None:
    _, _, env = dataset(tmp_path)
    cfg = parse_config(env | {"TRAINGRID_LFS": "false", "AWS_BATCH_JOB_NUM_NODES": "1",
                              "AWS_BATCH_JOB_NODE_INDEX": "0",
                              "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
                              "TRAINGRID_TRAIN_COMMAND": "true"})
    preload_if_configured(cfg)  # no exception: the job goes on
    assert "files load on first read" in capfd.readouterr().err


def test_no_preload_unless_asked() -> None:
    assert preload_config({"TRAINGRID_EXPORT_DIR": "/fsx/outputs"}) is None
