"""Unit tests of the pure parts of the MNP node entrypoint."""

import ast
import json
import shlex
import tarfile
from pathlib import Path

import pytest

from traingrid_node.config import ArchiveConfig, FsxConfig, archive_name, parse_config
from traingrid_node.gpus import detect_gpus
from traingrid_node.host import build_mount_command, sshd_wanted
from traingrid_node.launch import (
    build_mpirun_command,
    build_torchrun_command,
    launch_command,
    render_hostfile,
    write_hostfile,
)
from traingrid_node.network import NodeNetwork
from traingrid_node.outputs import archive_outputs
from traingrid_node.rendezvous import (
    Member,
    decode_message,
    encode_message,
    parse_registration,
    registration_message,
    timeout_message,
)
from traingrid_node.status import ConfigError, ProtocolError, exit_status

REFERENCE_EXTRA_MPI_PARAMS = (
    "-x HOROVOD_HIERARCHICAL_ALLREDUCE=1 -x HOROVOD_FUSION_THRESHOLD=16777216 "
    "-x NCCL_MIN_NRINGS=8 -x NCCL_LAUNCH_MODE=PARALLEL"
)

BASE_ENV = {
    "AWS_BATCH_JOB_NODE_INDEX": "0",
    "AWS_BATCH_JOB_NUM_NODES": "4",
    "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
    "TRAINGRID_TRAIN_COMMAND": "python train.py",
}


ETH0 = NodeNetwork("10.0.0.6", "eth0")


def worker_env(**overrides: str) -> dict[str, str]:
    env = {
        **BASE_ENV,
        "AWS_BATCH_JOB_NODE_INDEX": "1",
        "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "10.0.0.4",
    }
    env.update(overrides)
    return env


# --- host file ------------------------------------------------------------------------------


def test_hostfile_lists_main_node_first_then_by_index() -> None:
    members = [
        Member(3, "10.0.0.13", 8),
        Member(0, "10.0.0.10", 8),
        Member(2, "10.0.0.12", 4),
        Member(1, "10.0.0.11", 8),
    ]
    assert render_hostfile(members, main_index=2) == (
        "10.0.0.12 slots=4\n10.0.0.10 slots=8\n10.0.0.11 slots=8\n10.0.0.13 slots=8\n"
    )


def test_hostfile_for_local_nodes() -> None:
    members = [Member(i, "127.0.0.1", 2) for i in range(2)]
    assert render_hostfile(members, main_index=0) == "127.0.0.1 slots=2\n" * 2


def test_write_hostfile_creates_parent(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "hostfile"
    write_hostfile(path, [Member(0, "10.0.0.1", 16)], 0)
    assert path.read_text() == "10.0.0.1 slots=16\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["hostfile"]


# --- launcher commands ----------------------------------------------------------------------


def test_mpirun_command_matches_reference_flags() -> None:
    command = build_mpirun_command(
        hostfile="/tmp/hostfile",
        num_processes=16,
        interface="eth0",
        ssh_config="/run/traingrid/ssh/ssh_config",
        extra_mpi_params=shlex.split(REFERENCE_EXTRA_MPI_PARAMS),
        train_command=["python3", "train.py", "--epochs", "90"],
    )
    assert command == [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        "16",
        "--hostfile",
        "/tmp/hostfile",
        "--mca",
        "plm_rsh_no_tree_spawn",
        "1",
        "--bind-to",
        "socket",
        "--map-by",
        "slot",
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl",
        "^openib",
        "--mca",
        "btl_tcp_if_include",
        "eth0",
        "--mca",
        "oob_tcp_if_include",
        "eth0",
        "--mca",
        "plm_rsh_agent",
        "ssh -F /run/traingrid/ssh/ssh_config",
        "-x",
        "NCCL_SOCKET_IFNAME=eth0",
        "-x",
        "GLOO_SOCKET_IFNAME=eth0",
        "-x",
        "LD_LIBRARY_PATH",
        "-x",
        "PATH",
        "-x",
        "HOROVOD_HIERARCHICAL_ALLREDUCE=1",
        "-x",
        "HOROVOD_FUSION_THRESHOLD=16777216",
        "-x",
        "NCCL_MIN_NRINGS=8",
        "-x",
        "NCCL_LAUNCH_MODE=PARALLEL",
        "python3",
        "train.py",
        "--epochs",
        "90",
    ]


def test_launch_command_from_env_defaults_np_to_total_slots() -> None:
    cfg = parse_config(
        {**BASE_ENV, "EXTRA_MPI_PARAMS": REFERENCE_EXTRA_MPI_PARAMS, "NCCL_SOCKET_IFNAME": "ens5"}
    )
    command = launch_command(cfg, node_rank=0, main_address="10.0.0.4", network=ETH0, slots=8,
                             total_slots=32)
    assert command[:4] == ["mpirun", "--allow-run-as-root", "-np", "32"]
    # The job's own NCCL_SOCKET_IFNAME wins; Gloo and Open MPI get the node's interface.
    assert "NCCL_SOCKET_IFNAME=ens5" in command and "GLOO_SOCKET_IFNAME=eth0" in command
    assert command[-8:] == [
        *shlex.split(REFERENCE_EXTRA_MPI_PARAMS)[-6:],
        "python",
        "train.py",
    ]


def test_mpi_gpus_overrides_process_count() -> None:
    cfg = parse_config({**BASE_ENV, "MPI_GPUS": "6"})
    command = launch_command(cfg, node_rank=0, main_address="h", network=ETH0, slots=8,
                             total_slots=32)
    assert command[2:4] == ["-np", "6"]
    assert "NCCL_SOCKET_IFNAME=eth0" in command


def test_container_args_take_precedence_over_train_command_env() -> None:
    cfg = parse_config(BASE_ENV, ["python3", "other.py"])
    assert cfg.train_command == ("python3", "other.py")


def test_torchrun_command_is_elastic_with_a_c10d_rendezvous_on_the_main_node() -> None:
    command = build_torchrun_command(
        min_nodes=2,
        max_nodes=4,
        nproc_per_node=8,
        main_address="10.0.0.4",
        local_address="10.0.0.6",
        port=29500,
        run_id="run-1",
        is_main=False,
        max_restarts=3,
        train_command=["train.py", "--lr", "0.1"],
    )
    assert command == [
        "torchrun",
        "--nnodes=2:4",
        "--nproc-per-node=8",
        "--max-restarts=3",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.4:29500",
        "--local-addr=10.0.0.6",
        "--rdzv-id=run-1",
        "--rdzv-conf=is_host=false,last_call_timeout=5",
        "train.py",
        "--lr",
        "0.1",
    ]


def test_torchrun_command_runs_other_programs_without_python() -> None:
    command = build_torchrun_command(
        min_nodes=2,
        max_nodes=2,
        nproc_per_node=1,
        main_address="10.0.0.4",
        local_address="10.0.0.4",
        port=1234,
        run_id="r",
        is_main=True,
        max_restarts=0,
        train_command=["python", "-u", "train.py"],
    )
    assert "--rdzv-conf=is_host=true,last_call_timeout=5" in command
    assert command[-4:] == ["--no-python", "python", "-u", "train.py"]


def test_torchrun_launch_command_uses_node_slots_and_the_runs_elastic_range() -> None:
    cfg = parse_config(worker_env(TRAINGRID_LAUNCHER="torchrun", TRAINGRID_MIN_NODES="2",
                                  TRAINGRID_RUN="run-7"))
    assert cfg.runs_launcher
    command = launch_command(cfg, node_rank=3, main_address="10.0.0.4", network=ETH0, slots=4,
                             total_slots=4)
    assert command[:9] == [
        "torchrun",
        "--nnodes=2:4",
        "--nproc-per-node=4",
        "--max-restarts=3",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.4:29500",
        "--local-addr=10.0.0.6",
        "--rdzv-id=run-7",
        "--rdzv-conf=is_host=false,last_call_timeout=5",
    ]


def test_without_min_nodes_torchrun_waits_for_every_node() -> None:
    cfg = parse_config(worker_env(TRAINGRID_LAUNCHER="torchrun"))
    command = launch_command(cfg, node_rank=3, main_address="10.0.0.4", network=ETH0, slots=4,
                             total_slots=4)
    assert command[1] == "--nnodes=4:4"


@pytest.mark.parametrize("value", ["0", "5", "two"])
def test_min_nodes_outside_the_jobs_nodes_is_a_configuration_error(value: str) -> None:
    with pytest.raises(ConfigError, match="TRAINGRID_MIN_NODES"):
        parse_config(worker_env(TRAINGRID_MIN_NODES=value))


def test_launch_command_override_replaces_launcher() -> None:
    cfg = parse_config({**BASE_ENV, "TRAINGRID_LAUNCH_COMMAND": 'sh -c "exit 3"'})
    command = launch_command(cfg, node_rank=0, main_address="h", network=ETH0, slots=1,
                             total_slots=1)
    assert command == ["sh", "-c", "exit 3"]


def test_mount_command() -> None:
    fsx = FsxConfig("fs-0123.fsx.eu-west-1.amazonaws.com", "abcdefgh", Path("/fsx"))
    assert build_mount_command(fsx) == [
        "mount",
        "-t",
        "lustre",
        "-o",
        "relatime,flock",
        "fs-0123.fsx.eu-west-1.amazonaws.com@tcp:/abcdefgh",
        "/fsx",
    ]


# --- configuration --------------------------------------------------------------------------


def test_parse_config_defaults() -> None:
    cfg = parse_config(worker_env())
    assert (cfg.node_index, cfg.num_nodes, cfg.main_index) == (1, 4, 0)
    assert cfg.main_address == "10.0.0.4"
    assert cfg.port == 29400
    assert cfg.bind_address == "0.0.0.0"
    assert cfg.launcher == "mpirun"
    assert not cfg.is_main and not cfg.runs_launcher
    assert cfg.fsx is None and cfg.archive is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AWS_BATCH_JOB_NUM_NODES": None}, "AWS_BATCH_JOB_NUM_NODES is not set"),
        ({"AWS_BATCH_JOB_NODE_INDEX": "one"}, "AWS_BATCH_JOB_NODE_INDEX must be an integer"),
        ({"AWS_BATCH_JOB_NODE_INDEX": "4"}, "AWS_BATCH_JOB_NODE_INDEX must be between 0 and 3"),
        ({"AWS_BATCH_JOB_MAIN_NODE_INDEX": "-1"}, "AWS_BATCH_JOB_MAIN_NODE_INDEX must be"),
        ({"AWS_BATCH_JOB_NUM_NODES": "0"}, "AWS_BATCH_JOB_NUM_NODES must be >= 1"),
        (
            {"AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": None},
            "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS is not set (required on worker",
        ),
        (
            {"AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "10.0.0"},
            "must be an IPv4 address",
        ),
        ({"TRAINGRID_RENDEZVOUS_TIMEOUT": "0"}, "TRAINGRID_RENDEZVOUS_TIMEOUT must be a positive"),
        ({"TRAINGRID_RENDEZVOUS_PORT": "70000"}, "TRAINGRID_RENDEZVOUS_PORT must be between"),
        ({"TRAINGRID_LAUNCHER": "srun"}, "TRAINGRID_LAUNCHER must be one of mpirun, torchrun"),
        ({"EXTRA_MPI_PARAMS": "-x 'unterminated"}, "EXTRA_MPI_PARAMS is not a valid"),
        ({"MPI_GPUS": "0"}, "MPI_GPUS must be >= 1"),
        ({"FSX_DNS_NAME": "fs.example"}, "FSX_MOUNT_NAME is not set"),
        ({"TRAINGRID_ARCHIVE_DIR": "/fsx/out"}, "TRAINGRID_OUTPUT_DIR is not set"),
        ({"TRAINGRID_START_SSHD": "maybe"}, "TRAINGRID_START_SSHD must be auto, 1 or 0"),
    ],
)
def test_parse_config_rejects_bad_env(
    env: dict[str, str | None], message: str
) -> None:
    merged = worker_env()
    for key, value in env.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    with pytest.raises(ConfigError) as excinfo:
        parse_config(merged)
    assert message in str(excinfo.value)
    assert "\n" not in str(excinfo.value)


def test_main_node_needs_a_training_command() -> None:
    env = {k: v for k, v in BASE_ENV.items() if k != "TRAINGRID_TRAIN_COMMAND"}
    with pytest.raises(ConfigError, match="no training command"):
        parse_config(env)
    # An mpirun worker does not run the training command itself.
    worker = {k: v for k, v in worker_env().items() if k != "TRAINGRID_TRAIN_COMMAND"}
    assert parse_config(worker).train_command == ()


def test_main_node_address_is_optional_on_main() -> None:
    cfg = parse_config(BASE_ENV)
    assert cfg.is_main and cfg.main_address is None


def test_archive_name_is_file_safe() -> None:
    env = {"AWS_BATCH_JOB_ID": "0f1e2d3c-aaaa#0", "AWS_BATCH_JOB_ATTEMPT": "2"}
    assert archive_name(env) == "traingrid-0f1e2d3c-aaaa-0-attempt2"
    assert archive_name({}) == "traingrid-local"


def test_archive_outputs(tmp_path: Path) -> None:
    output = tmp_path / "output"
    (output / "ckpt").mkdir(parents=True)
    (output / "ckpt" / "model.pt").write_bytes(b"weights")
    archive = ArchiveConfig(output, tmp_path / "archive", "traingrid-job")
    target = archive_outputs(archive)
    assert target == tmp_path / "archive" / "traingrid-job.tar.gz"
    with tarfile.open(target) as tar:
        assert "output/ckpt/model.pt" in tar.getnames()


# --- GPU detection --------------------------------------------------------------------------


def test_detect_gpus_counts_any_nvidia_index(fake_dev16: Path) -> None:
    assert detect_gpus({}, dev_dir=fake_dev16, nvidia_smi="") == (
        16,
        f"{fake_dev16}/nvidia<N>",
    )


def test_detect_gpus_dev_dir_from_env(fake_dev16: Path) -> None:
    env = {"TRAINGRID_DEV_DIR": str(fake_dev16), "TRAINGRID_NVIDIA_SMI": ""}
    assert detect_gpus(env)[0] == 16


def test_detect_gpus_missing_dev_dir(tmp_path: Path) -> None:
    assert detect_gpus({}, dev_dir=tmp_path / "absent", nvidia_smi="")[0] == 0


def test_traingrid_gpus_overrides_detection(fake_dev16: Path) -> None:
    env = {"TRAINGRID_GPUS": "2"}
    assert detect_gpus(env, dev_dir=fake_dev16) == (2, "TRAINGRID_GPUS")
    with pytest.raises(ConfigError, match="TRAINGRID_GPUS must be an integer"):
        detect_gpus({"TRAINGRID_GPUS": "two"})


def test_detect_gpus_prefers_nvidia_smi(fake_bin, fake_dev16: Path) -> None:
    lines = [f"GPU {i}: NVIDIA A100-SXM4-40GB (UUID: GPU-{i})" for i in range(3)]
    lines.append("  MIG 1g.5gb      Device  0: (UUID: MIG-0)")
    bin_dir = fake_bin("nvidia-smi", f"print({json.dumps(chr(10).join(lines))})\n")
    smi = str(bin_dir / "nvidia-smi")
    assert detect_gpus({}, dev_dir=fake_dev16, nvidia_smi=smi) == (3, f"{smi} -L")


def test_detect_gpus_falls_back_when_nvidia_smi_fails(
    fake_bin, fake_dev16: Path
) -> None:
    bin_dir = fake_bin("nvidia-smi", "import sys\nsys.exit(9)\n")
    smi = str(bin_dir / "nvidia-smi")
    assert detect_gpus({}, dev_dir=fake_dev16, nvidia_smi=smi)[0] == 16


# --- rendezvous protocol and exit codes -----------------------------------------------------


def test_timeout_message_names_missing_nodes() -> None:
    assert (
        timeout_message(5, [2, 3], 4)
        == "rendezvous timed out after 5s: nodes 2, 3 of 4 never joined"
    )
    assert (
        timeout_message(1.5, [1], 2)
        == "rendezvous timed out after 1.5s: node 1 of 2 never joined"
    )


def test_registration_round_trip() -> None:
    cfg = parse_config(worker_env())
    line = encode_message(registration_message(cfg, "10.0.0.5", 8))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    main_cfg = parse_config(BASE_ENV)
    member = parse_registration(decode_message(line), main_cfg, {2}, "10.9.9.9")
    assert member == Member(1, "10.0.0.5", 8)
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBzX4Zm9JxGgBq3s5Jx2cWmJzQp8Tq0m4oR1dF2hF3kL"
    line = encode_message(registration_message(cfg, "10.0.0.5", 8, "eth0", key))
    member = parse_registration(decode_message(line), main_cfg, {2}, "10.9.9.9")
    assert member == Member(1, "10.0.0.5", 8, "eth0", key)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "hello"}, "expected a 'register' message"),
        ({"protocol": 99}, "unsupported protocol version"),
        ({"num_nodes": 3}, "node 1 reports 3 nodes, main expects 4"),
        ({"node_index": 0}, "invalid worker node index 0"),
        ({"node_index": 4}, "invalid worker node index 4"),
        ({"node_index": 2}, "node 2 is already registered"),
        ({"node_index": "1"}, "'node_index' must be an integer"),
        ({"slots": 0}, "registered 0 slots"),
        ({"address": "10.0.0.5 x"}, "invalid address"),
        ({"interface": "eth0 x"}, "invalid interface"),
        # Nothing but a key goes into the main node's known_hosts...
        ({"host_key": "ssh-ed25519 AAAA\n10.0.0.9 ssh-ed25519 AAAB"}, "invalid host_key"),
        ({"host_key": "@cert-authority * ssh-ed25519 AAAA"}, "unusable ssh host key"),
        # ...and only for an IPv4 address.
        ({"host_key": "ssh-ed25519 AAAA", "address": "*"}, "unusable ssh host key"),
    ],
)
def test_registration_is_validated(change: dict, message: str) -> None:
    main_cfg = parse_config(BASE_ENV)
    registration = {
        "type": "register",
        "protocol": 2,
        "node_index": 1,
        "num_nodes": 4,
        "address": "10.0.0.5",
        "slots": 8,
    }
    registration.update(change)
    with pytest.raises(ProtocolError, match=message):
        parse_registration(registration, main_cfg, {2}, "10.0.0.5")


def test_registration_without_address_uses_peer_address() -> None:
    main_cfg = parse_config(BASE_ENV)
    message = {"type": "register", "protocol": 2, "node_index": 3, "num_nodes": 4, "slots": 1}
    member = parse_registration(message, main_cfg, set(), "10.0.0.7")
    assert member.address == "10.0.0.7"


def test_decode_rejects_garbage() -> None:
    with pytest.raises(ProtocolError):
        decode_message(b"not json")
    with pytest.raises(ProtocolError):
        decode_message(b"[1, 2]")


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (3, 3), (-15, 143), (-9, 137)])
def test_exit_status_uses_128_plus_signal(returncode: int, status: int) -> None:
    assert exit_status(returncode) == status


def test_sshd_only_on_the_workers_of_multi_node_mpirun() -> None:
    assert sshd_wanted(parse_config(worker_env()))
    assert not sshd_wanted(parse_config(BASE_ENV))  # the main node only makes connections
    assert not sshd_wanted(parse_config(worker_env(TRAINGRID_LAUNCHER="torchrun")))
    assert not sshd_wanted(parse_config(worker_env(TRAINGRID_LAUNCH_COMMAND="true")))
    assert not sshd_wanted(parse_config(worker_env(TRAINGRID_START_SSHD="0")))
    single = {**BASE_ENV, "AWS_BATCH_JOB_NUM_NODES": "1", "TRAINGRID_START_SSHD": "1"}
    assert sshd_wanted(parse_config(single))


def test_the_node_writes_the_output_index_the_archive_check_reads() -> None:
    from traingrid.training import archive
    from traingrid_node import config

    assert config.OUTPUT_INDEX == archive.OUTPUT_INDEX


def test_the_retry_decision_reads_the_nodes_exit_codes_and_checkpoints_as_they_are() -> None:
    from traingrid.training import attempts
    from traingrid_node import metrics, status

    assert set(attempts.INFRASTRUCTURE_EXIT_CODES) == {
        status.EXIT_MOUNT, status.EXIT_RENDEZVOUS, status.EXIT_MAIN_LOST, status.EXIT_FABRIC,
        status.EXIT_PREFLIGHT, status.EXIT_STALLED}
    assert attempts.CHECKPOINT_DIR == metrics.CHECKPOINT_DIR
    assert attempts.CHECKPOINT_NAME.pattern == metrics.CHECKPOINT_NAME.pattern


def test_sagemaker_reads_the_trainers_metrics_and_runs_the_images_entry_point() -> None:
    from traingrid.campaigns import sagemaker_job
    from traingrid.runs import region_curves
    from traingrid_node import metrics

    assert {d["Name"]: d["Regex"] for d in sagemaker_job.METRIC_DEFINITIONS} == (
        metrics.LOG_METRICS)
    assert set(region_curves.METRIC_FIELDS) == set(metrics.LOG_METRICS)
    # The trainer writes its TensorBoard files where the job's request says SageMaker takes
    # them (read from its source: the trainer's packages need torch, not in this venv).
    config = Path(__file__).resolve().parents[2] / "containers/mnp/traingrid_trainer/config.py"
    constants = {target.id: node.value.value for node in ast.parse(config.read_text()).body
                 if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                 for target in node.targets if isinstance(target, ast.Name)}
    assert constants["SAGEMAKER_TENSORBOARD"] == sagemaker_job.TENSORBOARD_LOCAL_PATH
    root = Path(__file__).resolve().parents[2] / "containers" / "sagemaker"
    assert (root / sagemaker_job.ENTRY_POINT).is_file()
    assert f"COPY {sagemaker_job.ENTRY_POINT} /opt/ml/code/" in (root / "Dockerfile").read_text()


def test_the_image_holds_no_ssh_key_and_checks_host_keys() -> None:
    """Keys are made per job at start (traingrid_node.ssh); none is baked into the image."""
    dockerfile = (Path(__file__).resolve().parents[2] / "containers" / "mnp" / "Dockerfile")
    text = dockerfile.read_text()
    assert "ssh-keygen" not in text and "StrictHostKeyChecking" not in text
    assert "rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_*" in text


def test_sshd_and_mpiruns_ssh_use_the_port_the_backend_gives(tmp_path: Path) -> None:
    """On EKS the pod shares the host's network: the plan gives sshd a port of its own
    (job_shape.EKS_SSH_PORT), which sshd listens on and mpirun's ssh (-F config) connects to."""
    from traingrid.training.job_shape import SSH_PORTS, Backend, backend_environment
    from traingrid_node.ssh import client_config, known_host, sshd_config

    cfg = parse_config(worker_env(**backend_environment(Backend.EKS)))
    assert cfg.ssh_port == SSH_PORTS[Backend.EKS] != 22
    assert f"Port {cfg.ssh_port}\n" in sshd_config(tmp_path, "10.0.0.5", cfg.ssh_port)
    assert f"  Port {cfg.ssh_port}\n" in client_config(tmp_path, cfg.ssh_port)
    assert known_host("10.0.0.5", cfg.ssh_port, "ssh-ed25519 AAAA").startswith(
        f"[10.0.0.5]:{cfg.ssh_port} ")
    assert parse_config(worker_env(**backend_environment(Backend.ECS))).ssh_port == 22
