"""A region's campaign job launched as SageMaker launches it: SageMaker's training toolkit
(the ``train`` the image runs, the version it pins) on two hosts, algo-1 and algo-2.

Each host is a node of ``netns_rig`` (``eth0`` on a bridge, a network, mount and UTS namespace
of its own) with what SageMaker gives a training container: ``/opt/ml`` with the
``input/config`` files it writes (the hyperparameters those of the product's own
CreateTrainingJob request, as strings), the train channel, the image's code folder;
``/etc/hosts`` naming the job's hosts; and the image's ssh setup (``ssh-setup.sh``, the same
script the image's build runs). The toolkit does the rest: its sshd on every host, the workers
waiting for algo-1, its mpirun starting ``python -m mpi4py <script>`` on both hosts through
ssh, the status file it hands the workers at the end."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from netns_rig import RUN_DIR, NetnsRig
from sample_data import write_shards

from tests.trainer.conftest import MNP
from traingrid_node.metrics import FINAL_MODEL, METRICS_FILE

ROOT = MNP.parents[1]
sys.path.insert(0, str(ROOT / "layers" / "traingrid" / "python"))
from traingrid.campaigns.sagemaker_job import (  # noqa: E402
    CUSTOM_MPI_OPTIONS,
    ENTRY_POINT,
    METRIC_DEFINITIONS,
    create_request,
)

SAGEMAKER = ROOT / "containers" / "sagemaker"
TRAIN = Path(sys.executable).parent / "train"  # the toolkit's console script
HOSTS = ["algo-1", "algo-2"]
SSH_HOME = Path("/root/.ssh")
# The node image's (containers/mnp/Dockerfile: mkdir -p /run/sshd): Debian's sshd refuses to
# start without it, and a machine whose sshd never ran as a service has none.
PRIVILEGE_SEPARATION_DIR = Path("/run/sshd")
INSTANCE_TYPE = "ml.p3.2xlarge"  # one GPU: one process per host
JOB_TIMEOUT = 150.0
# The toolkit's log line before its command: "Invoking script with the following command:"
# then the command on a line of its own.
MPIRUN_LINE = re.compile(r"^mpirun .*$", re.MULTILINE)
TINY = {"num_epochs": 1, "batch_size": 2, "warmup_epochs": 0, "image_size": 32,
        "steps_per_epoch": 2, "log_every": 1, "loader_workers": 0}


def _missing() -> list[str]:
    wanted = {"/usr/sbin/sshd": "make sshd", "ssh": "make sshd", "mpirun": "make openmpi",
              "ip": "iproute2", "unshare": "util-linux", "hostname": "hostname"}
    missing = [f"{tool} ({how})" for tool, how in wanted.items() if shutil.which(tool) is None]
    if not TRAIN.exists():
        missing.append(f"{TRAIN} (SageMaker's training toolkit: make trainer-test installs it)")
    if os.geteuid() != 0:
        missing.append("root (network and mount namespaces)")
    return missing


pytestmark = pytest.mark.skipif(bool(_missing()), reason=f"needs {', '.join(_missing())}")


@dataclass
class Job:
    name: str
    status: int  # algo-1's train
    worker_status: int | None  # algo-2's train: None if it was still waiting when stopped
    seconds: float
    logs: dict[str, str]
    opt_ml: dict[str, Path]  # each host's /opt/ml

    @property
    def mpirun(self) -> str:
        found = MPIRUN_LINE.findall(self.logs["algo-1"])
        assert found, self.logs["algo-1"][-3000:]
        return found[0]


def input_config(request: dict[str, Any], host: str) -> dict[str, Any]:
    """The files SageMaker writes to ``/opt/ml/input/config`` for a CreateTrainingJob
    request, on ``host``."""
    resources = request["ResourceConfig"]
    hosts = [f"algo-{i + 1}" for i in range(resources["InstanceCount"])]
    mode = request["AlgorithmSpecification"]["TrainingInputMode"]
    return {
        "resourceconfig.json": {
            "current_host": host, "current_instance_type": resources["InstanceType"],
            "current_group_name": "homogeneousCluster", "hosts": hosts,
            "instance_groups": [{"instance_group_name": "homogeneousCluster",
                                 "instance_type": resources["InstanceType"],
                                 "hosts": hosts}],
            "network_interface_name": "eth0",
        },
        "hyperparameters.json": dict(request["HyperParameters"]),
        "inputdataconfig.json": {
            c["ChannelName"]: {"TrainingInputMode": c.get("InputMode", mode),
                               "RecordWrapperType": "None",
                               "S3DistributionType":
                                   c["DataSource"]["S3DataSource"]["S3DataDistributionType"]}
            for c in request["InputDataConfig"]},
    }


def the_request(name: str, hyperparameters: dict[str, Any]) -> dict[str, Any]:
    job = {"instance_type": INSTANCE_TYPE, "instance_count": len(HOSTS),
           "hyperparameters": hyperparameters, "bytes": 10**6, "objects": 3}
    return create_request(job, name=name, region="eu-west-1",  # type: ignore[arg-type]
                          s3_input="s3://campaign/campaigns/c/eu-west-1/",
                          output_path="s3://artifacts/campaigns/c/",
                          role_arn="arn:aws:iam::1:role/r",
                          image="1.dkr.ecr.eu-west-1.amazonaws.com/traingrid-sagemaker:0.1.0",
                          tags={})


def image_root(work: Path) -> Path:
    """What the image's build leaves for ssh: the packages' /etc/ssh and /etc/pam.d, then
    ssh-setup.sh over them."""
    root = work / "image"
    shutil.copytree("/etc/ssh", root / "etc" / "ssh", symlinks=True)
    shutil.copytree("/etc/pam.d", root / "etc" / "pam.d", symlinks=True)
    subprocess.run(["sh", str(SAGEMAKER / "ssh-setup.sh"), str(root)], check=True,
                   capture_output=True, text=True)
    return root


def prepare_host(rig: NetnsRig, host: str, work: Path, image: Path, script: Path,
                 request: dict[str, Any], data: Path) -> tuple[Path, str]:
    """The host's /opt/ml, /etc/hosts and /etc/environment, and the shell that mounts them
    (with the image's ssh) in the node's own mount namespace."""
    home = work / host
    opt_ml = home / "opt_ml"
    config = opt_ml / "input" / "config"
    config.mkdir(parents=True)
    for file, content in input_config(request, host).items():
        (config / file).write_text(json.dumps(content))
    shutil.copytree(data, opt_ml / "input" / "data" / "train")
    for folder in ("code", "model", "output/data"):  # as SageMaker makes them
        (opt_ml / folder).mkdir(parents=True)
    shutil.copy(script, opt_ml / "code" / ENTRY_POINT)  # the image's COPY
    (home / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
        f"{node.address} {name}\n" for node, name in zip(rig.nodes, HOSTS, strict=True)))
    (home / "environment").write_text("")
    binds = {opt_ml: "/opt/ml", home / "hosts": "/etc/hosts",
             home / "environment": "/etc/environment", image / "etc" / "ssh": "/etc/ssh",
             image / "etc" / "pam.d": "/etc/pam.d", image / "root" / ".ssh": str(SSH_HOME)}
    steps = [f"hostname {host}", "mount -t tmpfs -o size=1m,mode=755 opt /opt", "mkdir /opt/ml"]
    steps += [f"mount --bind {shlex.quote(str(s))} {t}" for s, t in binds.items()]
    # Last: a /tmp of its own (mpirun's session folders, the toolkit's status file), with the
    # project (its venvs, the trainer) still where it was when the checkout is under /tmp.
    steps.append("mkdir /opt/host-tmp && mount --bind /tmp /opt/host-tmp")
    steps.append("mount -t tmpfs -o size=64m,mode=1777 tmp /tmp")
    for kept in {ROOT, Path(sys.prefix)}:
        if kept.is_relative_to("/tmp"):
            inside = shlex.quote(str(Path("/opt/host-tmp") / kept.relative_to("/tmp")))
            steps.append(f"mkdir -p {shlex.quote(str(kept))} && "
                         f"mount --bind {inside} {shlex.quote(str(kept))}")
    return opt_ml, " && ".join(steps)


def host_env(job_name: str) -> dict[str, str]:
    """The image's ENV (containers/mnp and containers/sagemaker Dockerfiles), with this
    machine's Python first, and what SageMaker adds."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                "/usr/bin:/sbin:/bin",
        "HOME": "/root", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(MNP), "OMPI_MCA_plm_rsh_agent": "ssh",
        "SAGEMAKER_PROGRAM": ENTRY_POINT, "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/code",
        "TRAINING_JOB_NAME": job_name,
        "OMP_NUM_THREADS": "1",  # two CPU ranks on a shared machine
    }


def run_job(key: str, work: Path, script: Path, hyperparameters: dict[str, Any],
            data: Path) -> Job:
    """One SageMaker job on two hosts of a rig of its own; returns when algo-1's toolkit
    exits and algo-2's has too (or, if algo-1 failed, is stopped: SageMaker ends the job)."""
    name = f"traingrid-{key}"
    request = the_request(name, hyperparameters)
    work.mkdir(parents=True)
    image = image_root(work)
    tag = f"sm{os.getpid() % 10000}{key[:4]}"
    with NetnsRig(len(HOSTS), shm_mib=512, tag=tag) as rig:
        processes, opt_ml, started = {}, {}, time.monotonic()
        for node, host in zip(rig.nodes, HOSTS, strict=True):
            opt_ml[host], prepare = prepare_host(rig, host, work, image, script, request, data)
            with (work / f"{host}.log").open("w") as log:
                processes[host] = subprocess.Popen(
                    rig.command(node, [str(TRAIN)], prepare=prepare, uts=True),
                    env=host_env(name), stdout=log, stderr=subprocess.STDOUT, cwd=work,
                    start_new_session=True)
        try:
            try:
                status = processes["algo-1"].wait(timeout=JOB_TIMEOUT)
            except subprocess.TimeoutExpired:
                status = 124  # as timeout(1) says it; stopped below
            try:
                worker: int | None = processes["algo-2"].wait(
                    timeout=max(1.0, started + JOB_TIMEOUT - time.monotonic()) if status == 0
                    else 1.0)
            except subprocess.TimeoutExpired:
                worker = None
        finally:
            rig.stop_processes()
            for process in processes.values():
                process.wait()
        seconds = time.monotonic() - started
    logs = {host: (work / f"{host}.log").read_text() for host in HOSTS}
    return Job(name, status, worker, round(seconds, 1), logs, opt_ml)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Job]]:
    """Three jobs side by side (the toolkit waits 30 s at the end of each): the trainer,
    the trainer with a failing rank, a user's Horovod-style script."""
    work = tmp_path_factory.mktemp("sagemaker")
    data = work / "data"
    write_shards(data, "train-{:05d}-of-{:05d}", 2, 4, size=(48, 40))
    write_shards(data, "validation-{:05d}-of-{:05d}", 1, 2, size=(48, 40))
    trainer = SAGEMAKER / "traingrid_train.py"
    specs = {
        "train": (trainer, TINY),
        "fails": (trainer, {**TINY, "fail_rank": 1}),
        "horovod": (ROOT / "examples" / "horovod_world.py", {"num_epochs": 1}),
    }
    # Mount points: each host's own ssh folder, and the rigs' (made here once, not by three
    # rigs at the same time); sshd's privilege separation folder, as the image has it. They
    # stay, as on a machine whose sshd ran: make test runs other rigs beside this one, and a
    # folder removed under a rig's mount would detach it there.
    for folder in (SSH_HOME, RUN_DIR, PRIVILEGE_SEPARATION_DIR):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with ThreadPoolExecutor(len(specs)) as pool:
        futures = {key: pool.submit(run_job, key, work / key, script, hp,
                                    data) for key, (script, hp) in specs.items()}
        done = {key: future.result() for key, future in futures.items()}
    yield done


def explain(job: Job) -> str:
    return "\n".join(f"--- {host} ---\n{log[-4000:]}" for host, log in job.logs.items())


def repeated_mca(command: str) -> list[str]:
    """The MCA parameters an mpirun line sets more than once (Open MPI then refuses to start)."""
    words = command.split()
    names = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-mca", "--mca")]
    return sorted({n for n in names if names.count(n) > 1})


def test_the_toolkit_trains_on_both_hosts_through_its_mpirun(jobs: dict[str, Job]) -> None:
    job = jobs["train"]
    twice = repeated_mca(job.mpirun)
    assert not twice, (f"the job's sagemaker_mpi_custom_mpi_options set {twice}, which the "
                       f"toolkit's mpirun sets itself: Open MPI refuses to start\n{job.mpirun}")
    assert (job.status, job.worker_status) == (0, 0), explain(job)
    model = job.opt_ml["algo-1"] / "model"
    metrics = json.loads((model / METRICS_FILE).read_text())
    assert (metrics["world_size"], metrics["allreduce_ok"]) == (2, True), metrics
    assert (model / FINAL_MODEL).is_file()
    assert (job.opt_ml["algo-1"] / "output" / "success").is_file()
    assert not (job.opt_ml["algo-1"] / "output" / "failure").exists()
    # SageMaker's launch, as the toolkit built it: both hosts, the job's interface and MPI
    # options, mpi4py in front of the entry point, the hyperparameters as flags.
    command = job.mpirun
    for part in ("--host algo-1,algo-2 -np 2", "btl_tcp_if_include eth0", CUSTOM_MPI_OPTIONS,
                 "-m mpi4py traingrid_train.py",
                 "--num_epochs 1", "--steps_per_epoch 2"):
        assert part in command, command
    # The worker waited for algo-1, ran the ranks' daemon and got the toolkit's status file.
    assert "MPI training job status file found" in job.logs["algo-2"], explain(job)
    # SageMaker's metric definitions read the first rank's lines as the toolkit's mpirun
    # tags them. Here the log holds the ranks' stderr too, which can cut into a line (on
    # SageMaker stdout is a log stream of its own): at least one of the 2 windows is read.
    for definition in METRIC_DEFINITIONS:
        found = [float(m.group(1)) for line in job.logs["algo-1"].splitlines()
                 if (m := re.search(definition["Regex"], line))]
        assert 1 <= len(found) <= 2 and all(v > 0 for v in found), (definition["Name"],
                                                                     explain(job))
    print(f"\ntoolkit job: {job.seconds} s; {command}")


def test_a_failing_rank_fails_the_toolkit_with_its_failure_file(jobs: dict[str, Job]) -> None:
    job = jobs["fails"]
    assert job.status != 0, explain(job)
    failure = job.opt_ml["algo-1"] / "output" / "failure"
    assert failure.is_file(), explain(job)
    assert "ExecuteUserScriptError" in failure.read_text(), failure.read_text()
    assert "failing as asked (--fail_rank 1)" in job.logs["algo-1"], explain(job)
    assert not (job.opt_ml["algo-1"] / "model" / METRICS_FILE).exists()
    print(f"\nfailing job: algo-1 exited {job.status} after {job.seconds} s")


def test_a_users_horovod_style_script_runs_on_the_same_launch(jobs: dict[str, Job]) -> None:
    job = jobs["horovod"]
    assert (job.status, job.worker_status) == (0, 0), explain(job)
    assert "-m mpi4py traingrid_train.py --batch_size 256" in job.mpirun, job.mpirun
    world = json.loads((job.opt_ml["algo-1"] / "model" / "world.json").read_text())
    assert (world["world_size"], world["rank_sum"]) == (2, 1)
    assert sorted((r["rank"], r["local_rank"], r["host"]) for r in world["ranks"]) == [
        (0, 0, "algo-1"), (1, 0, "algo-2")]
    print(f"\nhorovod-style job: {job.seconds} s")
