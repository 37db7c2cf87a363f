"""ssh between a job's nodes, with the real sshd and ssh in a network namespace: the keys the
node program makes at start let the job's main node in, and nothing else."""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.conftest import Netns, needs_netns
from traingrid_node.ssh import (
    AUTHORIZED_KEYS,
    HOST_KEY,
    authorize,
    make_key,
    prepare_client,
    start_sshd,
)

SSHD = "/usr/sbin/sshd"
MAIN, NODE, STRANGER = "10.77.0.10", "10.77.0.11", "10.77.0.12"

pytestmark = [
    needs_netns,
    pytest.mark.skipif(shutil.which("ssh") is None or not Path(SSHD).exists(),
                       reason="no OpenSSH (make sshd installs it)"),
]


@pytest.fixture
def ssh_root() -> Iterator[Path]:
    """Key directories under /run: sshd's StrictModes refuses files below a world-writable
    directory such as /tmp (the node's own default is /run/traingrid/ssh)."""
    root = Path(tempfile.mkdtemp(dir="/run", prefix="traingrid-ssh-test-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ssh(netns: Netns, config: Path, source: str, host: str = NODE) -> tuple[int, str]:
    result = netns.run("ssh", "-F", str(config), "-b", source, host, "echo", "logged-in")
    return result.returncode, result.stdout + result.stderr


def start_node(netns: Netns, ssh_root: Path) -> str:
    return start_sshd([*netns.prefix(), SSHD], ssh_root / "node", NODE, 22)


def test_only_this_jobs_key_from_the_main_nodes_address_gets_in(netns: Netns,
                                                                  ssh_root: Path) -> None:
    host_key = start_node(netns, ssh_root)
    job_key, config = prepare_client(ssh_root / "main", 22, "job-1", [(NODE, host_key)])
    authorize(ssh_root / "node", job_key, MAIN)
    assert (ssh_root / "node" / AUTHORIZED_KEYS).read_text().startswith(
        f'from="{MAIN}",restrict ssh-ed25519 ')

    assert ssh(netns, config, MAIN) == (0, "logged-in\n")
    # The same key from another address, and another job's key from the main's address.
    status, output = ssh(netns, config, STRANGER)
    assert status == 255 and "Permission denied (publickey)" in output
    _, other_job = prepare_client(ssh_root / "other", 22, "job-2", [(NODE, host_key)])
    status, output = ssh(netns, other_job, MAIN)
    assert status == 255 and "Permission denied (publickey)" in output
    # sshd listens on the node's own address only.
    status, output = ssh(netns, config, MAIN, host=STRANGER)
    assert status == 255 and "Connection refused" in output


def test_a_host_whose_key_the_main_node_was_not_given_is_refused(netns: Netns,
                                                                 ssh_root: Path) -> None:
    start_node(netns, ssh_root)
    impostor = make_key(ssh_root / "impostor" / HOST_KEY, "impostor")
    job_key, config = prepare_client(ssh_root / "main", 22, "job-1", [(NODE, impostor)])
    authorize(ssh_root / "node", job_key, MAIN)

    status, output = ssh(netns, config, MAIN)
    assert status == 255 and "Host key verification failed" in output
    # No entry at all: refused too, and never added.
    _, config = prepare_client(ssh_root / "main", 22, "job-1", [])
    authorize(ssh_root / "node", job_key, MAIN)
    status, output = ssh(netns, config, MAIN)
    assert status == 255 and "Host key verification failed" in output
    assert (ssh_root / "main" / "known_hosts").read_text() == ""
