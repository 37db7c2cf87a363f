"""ssh between the nodes of one job, and only of that job.

``mpirun`` on the main node starts its daemons on the workers through ssh. Nothing of it is
in the image: every key is made when the job starts and handed out through the rendezvous.

- Each worker makes its own host key, starts sshd on its own address only (keys only, no
  passwords, no forwarding) and sends the host key with its registration.
- The main node makes the job's key pair, writes the workers' host keys to its known_hosts
  and an ssh configuration that checks them (``StrictHostKeyChecking yes``), and sends the
  job's public key in the start message.
- Each worker authorizes that key for logins from the main node's address only
  (``from="<main>",restrict``) and answers ``ready``; then the main node runs mpirun.

So a key of another job, a login from another address, or a host whose key the main node was
not given, is refused. Only the main node holds the private key (``plm_rsh_no_tree_spawn``).
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from traingrid_node.status import SshdError, log

HOST_KEY = "ssh_host_ed25519_key"
JOB_KEY = "id_ed25519"
SSHD_CONFIG = "sshd_config"
CLIENT_CONFIG = "ssh_config"
KNOWN_HOSTS = "known_hosts"
AUTHORIZED_KEYS = "authorized_keys"
SSHD_LOG = "sshd.log"
PRIVILEGE_SEPARATION_DIR = Path("/run/sshd")  # Debian/Ubuntu sshd refuses to start without it
# A public key as the nodes exchange it: algorithm and base64 blob, no options, no comment.
PUBLIC_KEY_RE = re.compile(
    r"(ssh-ed25519|ecdsa-sha2-nistp(?:256|384|521)|ssh-rsa) [A-Za-z0-9+/]+={0,3}"
)


def public_key(text: str) -> str:
    """``algorithm base64`` of an OpenSSH public key line; ValueError if it is not one."""
    fields = text.split()
    candidate = " ".join(fields[:2])
    if len(fields) < 2 or not PUBLIC_KEY_RE.fullmatch(candidate):
        raise ValueError(f"not an OpenSSH public key: {text[:60]!r}")
    return candidate


def _private_dir(ssh_dir: Path) -> None:
    ssh_dir.mkdir(parents=True, exist_ok=True)
    ssh_dir.chmod(0o700)


def _write(path: Path, content: str, mode: int = 0o600) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content)
    tmp.chmod(mode)
    tmp.replace(path)
    return path


def make_key(path: Path, comment: str) -> str:
    """A new ed25519 key pair at ``path`` (any old one replaced); returns the public key."""
    _private_dir(path.parent)
    for old in (path, path.with_name(path.name + ".pub")):
        old.unlink(missing_ok=True)
    command = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SshdError(f"cannot run {shlex.join(command)}: {exc}") from None
    if result.returncode != 0:
        raise SshdError(f"ssh-keygen exited {result.returncode}: {result.stderr.strip()}")
    return public_key(path.with_name(path.name + ".pub").read_text())


def sshd_config(ssh_dir: Path, address: str, port: int) -> str:
    return "\n".join([
        "# Written by traingrid_node when the job started.",
        f"ListenAddress {address}",
        f"Port {port}",
        f"HostKey {ssh_dir / HOST_KEY}",
        f"PidFile {ssh_dir / 'sshd.pid'}",
        f"AuthorizedKeysFile {ssh_dir / AUTHORIZED_KEYS}",
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitEmptyPasswords no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes yes",
        "PermitUserEnvironment no",
        "AllowAgentForwarding no",
        "AllowTcpForwarding no",
        "X11Forwarding no",
        "PermitTunnel no",
        "LogLevel INFO",
        "",
    ])


def start_sshd(command: Iterable[str], ssh_dir: Path, address: str, port: int) -> str:
    """Make this node's host key and start sshd (it daemonizes) on ``address`` only; returns
    the host's public key for the main node's known_hosts."""
    host_key = make_key(ssh_dir / HOST_KEY, "traingrid-node")
    config = _write(ssh_dir / SSHD_CONFIG, sshd_config(ssh_dir, address, port))
    PRIVILEGE_SEPARATION_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    full = [*command, "-f", str(config), "-E", str(ssh_dir / SSHD_LOG)]
    try:
        result = subprocess.run(full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SshdError(f"cannot run {shlex.join(full)}: {exc}") from None
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1:] or ["no output"]
        log_file = ssh_dir / SSHD_LOG
        if log_file.is_file():
            detail += log_file.read_text(errors="replace").strip().splitlines()[-1:]
        raise SshdError(f"{shlex.join(full)} exited {result.returncode}: {'; '.join(detail)}")
    log(f"started sshd on {address}:{port} (keys only): {shlex.join(full)}")
    return host_key


def sshd_installed(command: Iterable[str]) -> bool:
    return shutil.which(next(iter(command), "")) is not None


def authorize(ssh_dir: Path, key: str, main_address: str) -> Path:
    """Let the job's key in, from the main node's address only."""
    ipaddress.IPv4Address(main_address)  # nothing but an address goes into the options
    line = f'from="{main_address}",restrict {public_key(key)}\n'
    _private_dir(ssh_dir)
    return _write(ssh_dir / AUTHORIZED_KEYS, line)


def known_host(address: str, port: int, key: str) -> str:
    ipaddress.IPv4Address(address)
    host = address if port == 22 else f"[{address}]:{port}"
    return f"{host} {public_key(key)}\n"


def client_config(ssh_dir: Path, port: int) -> str:
    return "\n".join([
        "# Written by traingrid_node when the job started: mpirun's ssh to the workers.",
        "Host *",
        f"  Port {port}",
        f"  IdentityFile {ssh_dir / JOB_KEY}",
        "  IdentitiesOnly yes",
        "  IdentityAgent none",
        f"  UserKnownHostsFile {ssh_dir / KNOWN_HOSTS}",
        "  GlobalKnownHostsFile /dev/null",
        "  StrictHostKeyChecking yes",
        "  UpdateHostKeys no",
        "  CheckHostIP no",
        "  BatchMode yes",
        "  PasswordAuthentication no",
        "  KbdInteractiveAuthentication no",
        "  ForwardAgent no",
        "  ForwardX11 no",
        "  ConnectTimeout 30",
        "  LogLevel ERROR",
        "",
    ])


def prepare_client(ssh_dir: Path, port: int, job: str,
                   hosts: Iterable[tuple[str, str]]) -> tuple[str, Path]:
    """The main node's side: the job's key pair, the workers' host keys (address, key) in
    known_hosts, and the ssh configuration mpirun uses. Returns (public key, configuration)."""
    job_key = make_key(ssh_dir / JOB_KEY, f"traingrid-{job}")
    _write(ssh_dir / KNOWN_HOSTS, "".join(known_host(a, port, k) for a, k in hosts))
    return job_key, _write(ssh_dir / CLIENT_CONFIG, client_config(ssh_dir, port))
