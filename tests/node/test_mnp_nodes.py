"""Run the MNP node entrypoint as real local processes: rendezvous on 127.0.0.1, fake launchers.

Every node is ``sys.executable -m traingrid_node`` with AWS Batch's variables set;
the ``cluster`` fixture picks a free port and kills whatever is left at the end.
"""

import contextlib
import json
import os
import shlex
import signal
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

EXIT_CONFIG = 64
EXIT_MOUNT = 65
EXIT_RENDEZVOUS = 66
EXIT_MAIN_LOST = 67
EXIT_SSHD = 69

# Traps SIGTERM, records it and exits 42; READY is written once the trap is in place.
TRAPPING_LAUNCHER = """\
import os, signal, sys, time
from pathlib import Path

def on_term(signum, frame):
    Path(os.environ["MARKER"]).write_text(signal.Signals(signum).name)
    sys.exit(42)

signal.signal(signal.SIGTERM, on_term)
Path(os.environ["READY"]).write_text("ready")
time.sleep(20)
Path(os.environ["MARKER"]).write_text("never signalled")
"""

# Records its arguments and environment (for fake mpirun / torchrun / mount / sshd).
RECORDING_PROGRAM = """\
import json, os, sys
from pathlib import Path

out = Path(os.environ["RECORD_DIR"]) / (Path(sys.argv[0]).name + "-" +
                                        os.environ.get("TRAINGRID_NODE_RANK", "x") + ".json")
out.write_text(json.dumps({"argv": sys.argv[1:], "hostfile": os.environ.get("TRAINGRID_HOSTFILE")}))
sys.exit(int(os.environ.get("RECORD_EXIT", "0")))
"""


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def copy_hostfile_command(marker: Path) -> str:
    return f"sh -c 'cat \"$TRAINGRID_HOSTFILE\" > {shlex.quote(str(marker))}'"


def with_path(bin_dir: Path) -> str:
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


# --- rendezvous and launch ------------------------------------------------------------------


@pytest.mark.parametrize("num_nodes", [1, 2, 4])
def test_nodes_rendezvous_and_launch(cluster, tmp_path: Path, num_nodes: int) -> None:
    marker = tmp_path / "launched"
    nodes = cluster.start_all(
        num_nodes, {"TRAINGRID_LAUNCH_COMMAND": copy_hostfile_command(marker)}
    )

    codes = [node.wait() for node in nodes]

    assert codes == [0] * num_nodes, [node.log for node in nodes]
    assert marker.read_text() == "127.0.0.1 slots=2\n" * num_nodes
    main_log = nodes[0].log
    assert f"all {num_nodes} node(s) joined" in main_log
    assert all(line.startswith("[traingrid node 0] ") for line in main_log.splitlines())
    for node in nodes[1:]:
        assert f"[traingrid node {node.index}] main node reported status 0" in node.log


def test_main_failure_exit_code_reaches_every_node(cluster) -> None:
    nodes = cluster.start_all(2, {"TRAINGRID_LAUNCH_COMMAND": 'sh -c "exit 3"'})

    assert [node.wait() for node in nodes] == [3, 3]
    assert "launcher exited with status 3" in nodes[0].log
    assert "main node reported status 3" in nodes[1].log


def test_launcher_not_found_fails_every_node(cluster) -> None:
    nodes = cluster.start_all(2, {"TRAINGRID_LAUNCH_COMMAND": "traingrid-no-such-launcher"})

    assert [node.wait() for node in nodes] == [127, 127]
    assert "launcher not found: traingrid-no-such-launcher" in nodes[0].log


def test_main_node_need_not_be_index_zero(cluster, tmp_path: Path) -> None:
    marker = tmp_path / "launched"
    env = {
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": "1",
        "TRAINGRID_LAUNCH_COMMAND": copy_hostfile_command(marker),
    }
    main = cluster.start(1, 3, {**env, "TRAINGRID_GPUS": "4"})
    workers = [cluster.start(i, 3, {**env, "TRAINGRID_GPUS": str(i + 1)}) for i in (2, 0)]

    assert [node.wait() for node in (main, *workers)] == [0, 0, 0]
    assert marker.read_text() == "127.0.0.1 slots=4\n127.0.0.1 slots=1\n127.0.0.1 slots=3\n"


# --- failures during the rendezvous ---------------------------------------------------------


def test_missing_workers_time_out_with_their_indices(cluster) -> None:
    env = {"TRAINGRID_RENDEZVOUS_TIMEOUT": "1.5", "TRAINGRID_LAUNCH_COMMAND": "true"}
    main = cluster.start(0, 4, env)
    worker = cluster.start(1, 4, env)

    assert main.wait() == EXIT_RENDEZVOUS
    assert "rendezvous timed out after 1.5s: nodes 2, 3 of 4 never joined" in main.log
    assert "starting launcher" not in main.log
    assert worker.wait() == EXIT_RENDEZVOUS
    assert "nodes 2, 3 of 4 never joined" in worker.log


def test_worker_without_main_node_fails_clearly(cluster) -> None:
    worker = cluster.start(1, 2, {"TRAINGRID_RENDEZVOUS_TIMEOUT": "1"})

    assert worker.wait() == EXIT_RENDEZVOUS
    expected = f"cannot reach main node 127.0.0.1:{cluster.port} within 1s"
    assert expected in worker.log, worker.log


def test_worker_that_loses_the_main_node_fails(cluster, tmp_path: Path) -> None:
    pid_file = tmp_path / "launcher.pid"
    command = shlex.join(["sh", "-c", f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 20"])
    main, worker = cluster.start_all(2, {"TRAINGRID_LAUNCH_COMMAND": command})
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != ""), main.log
    launcher_pid = int(pid_file.read_text())
    try:
        main.proc.kill()  # the main node vanishes without reporting a status
        assert worker.wait() == EXIT_MAIN_LOST
        assert "lost the main node: the main node closed the connection" in worker.log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(launcher_pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AWS_BATCH_JOB_NUM_NODES": None}, "AWS_BATCH_JOB_NUM_NODES is not set"),
        ({"AWS_BATCH_JOB_NODE_INDEX": "x"}, "AWS_BATCH_JOB_NODE_INDEX must be an integer"),
        ({"AWS_BATCH_JOB_NODE_INDEX": "2"}, "AWS_BATCH_JOB_NODE_INDEX must be between 0 and 1"),
        ({"TRAINGRID_GPUS": "-1"}, "TRAINGRID_GPUS must be >= 0"),
    ],
)
def test_invalid_environment_is_one_clear_line(
    cluster, env: dict[str, str | None], message: str
) -> None:
    result = cluster.run(1, 2, {"TRAINGRID_LAUNCH_COMMAND": "true", **env})

    assert result.returncode == EXIT_CONFIG
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "configuration error: " in lines[0] and message in lines[0]


def test_worker_needs_main_node_address(cluster) -> None:
    result = cluster.run(1, 2, {"AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": None})

    assert result.returncode == EXIT_CONFIG
    assert "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS is not set" in result.stderr


# --- signals --------------------------------------------------------------------------------


def test_sigterm_is_forwarded_to_launcher(cluster, tmp_path: Path) -> None:
    script = tmp_path / "launcher.py"
    script.write_text(TRAPPING_LAUNCHER)
    ready, marker = tmp_path / "ready", tmp_path / "marker"
    env = {
        "TRAINGRID_LAUNCH_COMMAND": shlex.join([sys.executable, str(script)]),
        "READY": str(ready),
        "MARKER": str(marker),
    }
    main, worker = cluster.start_all(2, env)
    assert wait_for(ready.exists), main.log

    main.proc.send_signal(signal.SIGTERM)

    assert main.wait() == 42, main.log
    assert marker.read_text() == "SIGTERM"
    assert "forwarded SIGTERM to the launcher" in main.log
    assert worker.wait() == 42
    assert "main node reported status 42" in worker.log


def test_untrapped_sigterm_exits_128_plus_signal(cluster, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    command = f"sh -c 'touch {shlex.quote(str(ready))}; exec sleep 20'"
    main = cluster.start(0, 1, {"TRAINGRID_LAUNCH_COMMAND": command})
    assert wait_for(ready.exists), main.log

    main.proc.send_signal(signal.SIGTERM)

    assert main.wait() == 128 + signal.SIGTERM
    assert "launcher was killed by SIGTERM" in main.log


def test_sigterm_during_rendezvous_stops_connected_workers(cluster) -> None:
    env = {"TRAINGRID_LAUNCH_COMMAND": "true"}
    main = cluster.start(0, 3, env)
    worker = cluster.start(1, 3, env)
    assert wait_for(lambda: "node 1 joined" in main.log), main.log

    main.proc.send_signal(signal.SIGTERM)

    assert main.wait() == 128 + signal.SIGTERM
    assert worker.wait() == 128 + signal.SIGTERM
    assert "interrupted: received SIGTERM" in worker.log


# --- GPUs, launchers, FSx, sshd, archive ----------------------------------------------------


def test_sixteen_gpus_from_dev_dir_become_slots(cluster, tmp_path: Path, fake_dev16) -> None:
    marker = tmp_path / "launched"
    env = {
        "TRAINGRID_GPUS": None,
        "TRAINGRID_DEV_DIR": str(fake_dev16),
        "TRAINGRID_LAUNCH_COMMAND": copy_hostfile_command(marker),
    }
    nodes = cluster.start_all(2, env)

    assert [node.wait() for node in nodes] == [0, 0]
    assert marker.read_text() == "127.0.0.1 slots=16\n" * 2
    assert "16 GPU(s) via" in nodes[1].log


def test_default_launcher_is_mpirun_on_main_only(cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin("mpirun", RECORDING_PROGRAM)
    extra = "-x HOROVOD_HIERARCHICAL_ALLREDUCE=1 -x NCCL_LAUNCH_MODE=PARALLEL"
    env = {"PATH": with_path(bin_dir), "RECORD_DIR": str(tmp_path), "EXTRA_MPI_PARAMS": extra}
    main = cluster.start(0, 2, env, args=["python3", "train.py", "--epochs", "1"])
    worker = cluster.start(1, 2, env)

    assert [main.wait(), worker.wait()] == [0, 0], main.log
    record = json.loads((tmp_path / "mpirun-0.json").read_text())
    assert record["hostfile"] == str(cluster.hostfile)
    assert record["argv"][:5] == [
        "--allow-run-as-root",
        "-np",
        "4",
        "--hostfile",
        record["hostfile"],
    ]
    # The job's variables the trainer reads are forwarded to every rank by name.
    assert "TRAINGRID_MAIN_ADDRESS" in record["argv"]
    assert record["argv"][-8:] == [
        "-x",
        "HOROVOD_HIERARCHICAL_ALLREDUCE=1",
        "-x",
        "NCCL_LAUNCH_MODE=PARALLEL",
        "python3",
        "train.py",
        "--epochs",
        "1",
    ]
    assert sorted(p.name for p in tmp_path.glob("mpirun-*.json")) == ["mpirun-0.json"]


def test_torchrun_runs_on_every_node(cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin("torchrun", RECORDING_PROGRAM)
    env = {
        "PATH": with_path(bin_dir),
        "RECORD_DIR": str(tmp_path),
        "TRAINGRID_LAUNCHER": "torchrun",
        "TRAINGRID_TRAIN_COMMAND": "train.py --lr 0.1",
        "TRAINGRID_MIN_NODES": "2",
        "TRAINGRID_RUN": "run-1",
    }
    nodes = cluster.start_all(3, env)

    assert [node.wait() for node in nodes] == [0, 0, 0]
    for rank in range(3):
        argv = json.loads((tmp_path / f"torchrun-{rank}.json").read_text())["argv"]
        assert argv == [
            "--nnodes=2:3",
            "--nproc-per-node=2",
            "--max-restarts=3",
            "--rdzv-backend=c10d",
            "--rdzv-endpoint=127.0.0.1:29500",
            "--local-addr=127.0.0.1",
            "--rdzv-id=run-1",
            f"--rdzv-conf=is_host={'true' if rank == 0 else 'false'},last_call_timeout=5",
            "train.py",
            "--lr",
            "0.1",
        ]


def test_torchrun_worker_exits_with_its_own_status(cluster, fake_bin, tmp_path: Path) -> None:
    bin_dir = fake_bin("torchrun", RECORDING_PROGRAM)
    env = {
        "PATH": with_path(bin_dir),
        "RECORD_DIR": str(tmp_path),
        "TRAINGRID_LAUNCHER": "torchrun",
        "TRAINGRID_TRAIN_COMMAND": "train.py",
    }
    main = cluster.start(0, 2, env)
    worker = cluster.start(1, 2, {**env, "RECORD_EXIT": "5"})

    assert [main.wait(), worker.wait()] == [0, 5]


def test_fsx_is_mounted_before_rendezvous(cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin("mount", RECORDING_PROGRAM)
    mount_point = tmp_path / "fsx"
    env = {
        "PATH": with_path(bin_dir),
        "RECORD_DIR": str(tmp_path),
        "FSX_DNS_NAME": "fs-0123.fsx.eu-west-1.amazonaws.com",
        "FSX_MOUNT_NAME": "abcdefgh",
        "FSX_MOUNT_POINT": str(mount_point),
        "TRAINGRID_LAUNCH_COMMAND": "true",
    }
    result = cluster.run(0, 1, env)

    assert result.returncode == 0, result.stderr
    argv = json.loads((tmp_path / "mount-x.json").read_text())["argv"]
    assert argv == [
        "-t",
        "lustre",
        "-o",
        "relatime,flock",
        "fs-0123.fsx.eu-west-1.amazonaws.com@tcp:/abcdefgh",
        str(mount_point),
    ]
    assert mount_point.is_dir()


def test_fsx_mount_failure_exits_non_zero(cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin(
        "mount",
        "import sys\nprint('mount.lustre: mount failed: No such device', file=sys.stderr)\n"
        "sys.exit(32)\n",
    )
    env = {
        "PATH": with_path(bin_dir),
        "FSX_DNS_NAME": "fs.example",
        "FSX_MOUNT_NAME": "abc",
        "FSX_MOUNT_POINT": str(tmp_path / "fsx"),
        "TRAINGRID_LAUNCH_COMMAND": "true",
    }
    result = cluster.run(0, 1, env)

    assert result.returncode == EXIT_MOUNT
    assert "FSx for Lustre mount failed: mount of fs.example@tcp:/abc" in result.stderr
    assert "exited 32: mount.lustre: mount failed: No such device" in result.stderr


def test_fsx_mount_skipped_when_not_configured(cluster) -> None:
    result = cluster.run(0, 1, {"TRAINGRID_LAUNCH_COMMAND": "true"})

    assert result.returncode == 0
    assert "FSx for Lustre not configured" in result.stderr


def test_sshd_started_when_required(cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin("fake-sshd", RECORDING_PROGRAM)
    env = {
        "RECORD_DIR": str(tmp_path),
        "TRAINGRID_START_SSHD": "1",
        "TRAINGRID_SSHD_COMMAND": f"{bin_dir / 'fake-sshd'} -p 2222",
        "TRAINGRID_LAUNCH_COMMAND": "true",
        "TRAINGRID_SSH_DIR": str(tmp_path / "ssh"),
    }
    assert cluster.run(0, 1, env).returncode == 0
    argv = json.loads((tmp_path / "fake-sshd-x.json").read_text())["argv"]
    # The job's options, then the configuration the node wrote: its own address, keys only.
    assert argv[:3] == ["-p", "2222", "-f"]
    config = Path(argv[3]).read_text()
    assert "ListenAddress 127.0.0.1\n" in config and "PasswordAuthentication no\n" in config

    failing = cluster.run(0, 1, {**env, "RECORD_EXIT": "1"})
    assert failing.returncode == EXIT_SSHD
    assert "sshd failed:" in failing.stderr


def test_outputs_are_archived_after_launch(cluster, tmp_path: Path) -> None:
    output, archive = tmp_path / "output", tmp_path / "archive"
    script = f"mkdir -p {shlex.quote(str(output))} && echo done > {shlex.quote(str(output))}/r.txt"
    command = shlex.join(["sh", "-c", script])
    env = {
        "TRAINGRID_LAUNCH_COMMAND": command,
        "TRAINGRID_OUTPUT_DIR": str(output),
        "TRAINGRID_ARCHIVE_DIR": str(archive),
        "AWS_BATCH_JOB_ID": "job-1#0",
    }
    assert cluster.run(0, 1, env).returncode == 0

    with tarfile.open(archive / "traingrid-job-1-0.tar.gz") as tar:
        assert "output/r.txt" in tar.getnames()


# A Lustre client's HSM commands: hsm_archive queues files, and each queued file reports
# "archived" from the second hsm_state call on (unless FAKE_LFS_STUCK is set).
FAKE_LFS = r'''
import json, os, sys
from pathlib import Path
state = Path(__file__).with_name("lfs-state.json")
queued = json.loads(state.read_text()) if state.exists() else {}
action, files = sys.argv[1], sys.argv[2:]
for f in files:
    if action == "hsm_archive":
        queued[f] = 0
    elif action == "hsm_state":
        polls = queued.get(f)
        done = polls is not None and polls >= 1 and not os.environ.get("FAKE_LFS_STUCK")
        flags = "(0x00000009) exists archived, archive_id:1" if done else "(0x00000001) exists"
        print(f"{f}: {flags}")
        if polls is not None:
            queued[f] = polls + 1
    else:
        sys.exit(f"lfs: unknown action {action}")
state.write_text(json.dumps(queued))
'''


def _export_env(tmp_path: Path, bin_dir: Path, output: Path) -> dict[str, str]:
    script = (f"mkdir -p {shlex.quote(str(output))}/model && echo w > "
              f"{shlex.quote(str(output))}/model/final.ckpt && echo log > "
              f"{shlex.quote(str(output))}/main.log")
    return {
        "TRAINGRID_LAUNCH_COMMAND": shlex.join(["sh", "-c", script]),
        "TRAINGRID_EXPORT_DIR": str(output),
        "TRAINGRID_LFS": str(bin_dir / "lfs"),
    }


def test_outputs_are_exported_with_an_index_before_the_job_ends(cluster, fake_bin,
                                                                 tmp_path: Path) -> None:
    output = tmp_path / "output"
    bin_dir = fake_bin("lfs", FAKE_LFS)
    result = cluster.run(0, 1, _export_env(tmp_path, bin_dir, output))
    assert result.returncode == 0, result.stderr

    index = json.loads((output / "outputs.json").read_text())
    assert index["files"] == [{"path": "main.log", "size": 4},
                              {"path": "model/final.ckpt", "size": 2}]
    archived = json.loads((bin_dir / "lfs-state.json").read_text())
    assert set(archived) == {str(output / n) for n in ("main.log", "model/final.ckpt",
                                                       "outputs.json")}
    assert "exported 3 output file(s) to the data repository" in result.stderr


def test_an_export_that_does_not_finish_leaves_the_status_alone(cluster, fake_bin,
                                                                tmp_path: Path) -> None:
    output = tmp_path / "output"
    bin_dir = fake_bin("lfs", FAKE_LFS)
    env = _export_env(tmp_path, bin_dir, output) | {
        "FAKE_LFS_STUCK": "1", "TRAINGRID_EXPORT_TIMEOUT": "0.5"}
    result = cluster.run(0, 1, env)
    assert result.returncode == 0, result.stderr
    assert "exported 0 of 3 output file(s)" in result.stderr
    assert "the rest is left to the export task" in result.stderr

    failing = cluster.run(0, 1, env | {"TRAINGRID_LFS": str(bin_dir / "missing-lfs")})
    assert failing.returncode == 0
    assert "exporting" in failing.stderr and "failed" in failing.stderr


# hsm_restore queues files; hsm_action reports a queued file NOOP (loaded) from its second
# call on, RESTORE before.
FAKE_LFS_RESTORE = r'''
import json, sys
from pathlib import Path
state = Path(__file__).with_name("lfs-restore.json")
queued = json.loads(state.read_text()) if state.exists() else {}
action, files = sys.argv[1], sys.argv[2:]
for f in files:
    if action == "hsm_restore":
        queued[f] = 0
    elif action == "hsm_action":
        polls = queued.get(f)
        print(f"{f}: {'NOOP' if polls else 'RESTORE running'}")
        if polls is not None:
            queued[f] = polls + 1
    else:
        sys.exit(f"lfs: unknown action {action}")
state.write_text(json.dumps(queued))
'''


def test_the_main_node_preloads_the_dataset_before_any_rank_starts(cluster, fake_bin,
                                                                    tmp_path: Path) -> None:
    dataset, output = tmp_path / "fsx", tmp_path / "fsx" / "outputs"
    (dataset / "train").mkdir(parents=True)
    output.mkdir()
    shards = [dataset / "train" / f"train-0000{n}-of-00002" for n in (0, 1)]
    for shard in shards:
        shard.write_bytes(b"x" * 64)
    (output / "old.ckpt").write_bytes(b"y")
    bin_dir = fake_bin("lfs", FAKE_LFS_RESTORE)
    state = bin_dir / "lfs-restore.json"
    seen = tmp_path / "restored-at-launch"
    nodes = cluster.start_all(2, {
        "TRAINGRID_PRELOAD_DIR": str(dataset), "OUTPUT_DIR": str(output),
        "TRAINGRID_LFS": str(bin_dir / "lfs"),
        # What had been restored when the launcher started.
        "TRAINGRID_LAUNCH_COMMAND": shlex.join(["cp", str(state), str(seen)]),
    })
    assert [node.wait() for node in nodes] == [0, 0], [node.log for node in nodes]
    assert sorted(json.loads(seen.read_text())) == sorted(map(str, shards))
    assert "preloaded 2 of 2 dataset file(s) from S3" in nodes[0].log


# --- EFA ------------------------------------------------------------------------------------


def efa_dev(tmp_path: Path, devices: int) -> Path:
    dev = tmp_path / f"dev-efa{devices}"
    (dev / "infiniband").mkdir(parents=True)
    for index in range(devices):
        (dev / "infiniband" / f"uverbs{index}").touch()
    return dev


def test_an_efa_node_passes_libfabric_s_settings_to_every_rank(
        cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin("mpirun", RECORDING_PROGRAM)
    env = {"PATH": with_path(bin_dir), "RECORD_DIR": str(tmp_path), "TRAINGRID_GPUS": "8",
           "TRAINGRID_EFA_DEVICES": "4", "TRAINGRID_EFA_RDMA": "1",
           "TRAINGRID_DEV_DIR": str(efa_dev(tmp_path, 4))}
    main = cluster.start(0, 1, env, args=["python3", "-m", "traingrid_trainer"])

    assert main.wait() == 0, main.log
    assert "EFA: 4 device(s); libfabric provider efa, RDMA reads" in main.log
    argv = json.loads((tmp_path / "mpirun-0.json").read_text())["argv"]
    forwarded = {argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"}
    assert {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE"} <= forwarded


def test_an_efa_node_that_sees_too_few_devices_stops_before_training(
        cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin("mpirun", RECORDING_PROGRAM)
    env = {"PATH": with_path(bin_dir), "RECORD_DIR": str(tmp_path), "TRAINGRID_GPUS": "8",
           "TRAINGRID_EFA_DEVICES": "32", "TRAINGRID_DEV_DIR": str(efa_dev(tmp_path, 4))}
    main = cluster.start(0, 1, env, args=["python3", "-m", "traingrid_trainer"])

    assert main.wait() == 70
    assert "has 32 EFA interface(s) but the container sees 4" in main.log
    assert not (tmp_path / "mpirun-0.json").exists()


def test_a_node_without_efa_sets_no_libfabric_provider(cluster, tmp_path: Path, fake_bin) -> None:
    bin_dir = fake_bin("mpirun", RECORDING_PROGRAM)
    env = {"PATH": with_path(bin_dir), "RECORD_DIR": str(tmp_path), "TRAINGRID_GPUS": "8",
           "TRAINGRID_EFA_DEVICES": "0"}
    main = cluster.start(0, 1, env, args=["python3", "-m", "traingrid_trainer"])

    assert main.wait() == 0, main.log
    assert "no EFA on this instance type" in main.log
    argv = json.loads((tmp_path / "mpirun-0.json").read_text())["argv"]
    assert "FI_PROVIDER" not in argv


def test_the_job_s_ssh_keys_are_handed_out_through_the_rendezvous(
        cluster, tmp_path: Path, fake_bin) -> None:
    """Workers send their host keys; the main node's known_hosts gets them, each worker the
    job's public key (from the main node's address only), and mpirun ssh's configuration."""
    bin_dir = fake_bin("mpirun", RECORDING_PROGRAM)
    sshd = fake_bin("fake-sshd", "import sys; sys.exit(0)\n") / "fake-sshd"
    env = {"PATH": with_path(bin_dir), "RECORD_DIR": str(tmp_path),
           "TRAINGRID_START_SSHD": None, "TRAINGRID_SSHD_COMMAND": str(sshd)}
    nodes = [cluster.start(i, 3, {**env, "TRAINGRID_SSH_DIR": str(tmp_path / f"ssh-{i}")},
                           args=["python3", "train.py"]) for i in (2, 1, 0)]

    assert [node.wait() for node in nodes] == [0, 0, 0], nodes[2].log
    main = tmp_path / "ssh-0"
    job_key = " ".join((main / "id_ed25519.pub").read_text().split()[:2])
    for index in (1, 2):
        host_key = " ".join((tmp_path / f"ssh-{index}" / "ssh_host_ed25519_key.pub")
                            .read_text().split()[:2])
        assert f"127.0.0.1 {host_key}\n" in (main / "known_hosts").read_text()
        assert (tmp_path / f"ssh-{index}" / "authorized_keys").read_text() == (
            f'from="127.0.0.1",restrict {job_key}\n')
    assert not (main / "ssh_host_ed25519_key").exists()  # the main node runs no sshd
    argv = json.loads((tmp_path / "mpirun-0.json").read_text())["argv"]
    assert ["plm_rsh_agent", f"ssh -F {main / 'ssh_config'}"] in [
        argv[i:i + 2] for i in range(len(argv))]
    assert "StrictHostKeyChecking yes" in (main / "ssh_config").read_text()
