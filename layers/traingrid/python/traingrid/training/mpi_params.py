"""What a request's ``extra_mpi_params`` may add to mpirun: the refusal rules, in one place."""

from __future__ import annotations

import re

# extra_mpi_params may only set (``-x NAME=VALUE``) or forward (``-x NAME``) the variables
# that tune the collectives: no other mpirun option (``--mca plm_rsh_agent`` runs a program
# of the caller's choosing on every node) and no variable that loads or names code or files
# (LD_PRELOAD, PYTHONPATH, NCCL_NET_PLUGIN, FI_PROVIDER_PATH, NCCL_CONF_FILE, ...).
MPI_VARIABLE_PREFIXES = ("NCCL_", "FI_", "GLOO_", "HOROVOD_", "TORCH_NCCL_",
                         "TORCH_DISTRIBUTED_")
MPI_VARIABLE_NAMES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_DEVICE_MAX_CONNECTIONS",
                      "CUDA_LAUNCH_BLOCKING")
# A word of a variable's name (between underscores) that makes it load, read or write
# something named by its value, whatever its prefix.
MPI_VARIABLE_REFUSED_WORDS = frozenset({
    "PLUGIN", "PATH", "FILE", "CONF", "CONFIG", "DIR", "LIB", "LIBRARY", "PRELOAD", "SO",
    "TIMELINE", "SCRIPT", "CMD", "COMMAND", "EXEC", "HOOK"})
# Variables that choose where ranks meet, listen or send: an address or port in the value
# would point the job's own traffic (its bootstrap, its gradients, its health queries)
# elsewhere, or open a socket on an address of the caller's choosing. The job's launcher and
# rendezvous decide them; none is a knob of the collectives.
# - NCCL_COMM_ID: the ip:port of the root rank's bootstrap socket, which every rank then
#   dials instead of the one the job's own unique id names (NCCL's bootstrap).
# - NCCL_RAS_ADDR: where the RAS threads listen for clients (default localhost:28028, NCCL's
#   "RAS" troubleshooting guide, since 2.24).
# - HOROVOD_GLOO_RENDEZVOUS_ADDR/_PORT: the rendezvous server every Gloo rank registers with
#   and learns its peers' addresses from; HOROVOD_HOSTNAME: the host a rank says it is on
#   in that rendezvous.
# - MASTER_ADDR/MASTER_PORT: torch.distributed's rendezvous (env://), not in the allowlist
#   either; named so the refusal says why.
# Any other name with one of these words is refused alike (a future …_ADDR, …_PORT).
# Choosing among the node's own interfaces (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME,
# HOROVOD_GLOO_IFACE, FI_*_IFACE) or RoCE's GID (NCCL_IB_ADDR_FAMILY/_RANGE) names no other
# host and stays allowed; NCCL_HOSTID is a label for which ranks share a host, no address.
MPI_ADDRESS_NAMES = frozenset({"NCCL_COMM_ID", "MASTER_ADDR", "MASTER_PORT"})
MPI_ADDRESS_WORDS = frozenset({"ADDR", "ADDRESS", "PORT", "PORTS", "HOSTNAME", "URL", "URI",
                               "ENDPOINT", "RENDEZVOUS"})
MPI_ADDRESS_ALLOWED = frozenset({"NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE"})


def mpi_address_variable(name: str) -> bool:
    """Whether ``name`` chooses where the job's ranks meet, listen or send."""
    return name not in MPI_ADDRESS_ALLOWED and (
        name in MPI_ADDRESS_NAMES or bool(MPI_ADDRESS_WORDS & set(name.split("_"))))


_MPI_NAME = (r"(?:(?:" + "|".join(p.rstrip("_") for p in MPI_VARIABLE_PREFIXES)
             + r")_[A-Z0-9_]+|" + "|".join(MPI_VARIABLE_NAMES) + ")")
# A value: no quotes, no shell characters, no '/' (no value may name a path).
_MPI_VALUE = r"[A-Za-z0-9_.,:^+-]*"
_MPI_PAIR = rf"-x {_MPI_NAME}(?:={_MPI_VALUE})?"
# What the JSON Schema can say; the refused words are checked in mpi_params_problems.
MPI_PARAMS_PATTERN = re.compile(rf"^ *(?:{_MPI_PAIR}(?: +{_MPI_PAIR})*)? *$")
_MPI_NAME_RE = re.compile(_MPI_NAME)
_MPI_VALUE_RE = re.compile(_MPI_VALUE)


def mpi_params_problems(value: str) -> list[str]:
    """Every reason ``value`` is not a list of ``-x NAME[=VALUE]`` of allowed variables."""
    problems: list[str] = []
    stray: list[str] = []
    words = [w for w in value.split(" ") if w]
    allowed = ", ".join([p + "*" for p in MPI_VARIABLE_PREFIXES] + list(MPI_VARIABLE_NAMES))
    index = 0
    while index < len(words):
        if words[index] != "-x" or index + 1 == len(words):
            stray.append(words[index])
            index += 1
            continue
        name, equals, setting = words[index + 1].partition("=")
        index += 2
        refused = sorted(MPI_VARIABLE_REFUSED_WORDS & set(name.split("_")))
        if mpi_address_variable(name):
            problems.append(f"{name} may not be set: it chooses where the job's ranks meet, "
                            "listen or send (an address or port), which the job's own launcher "
                            "and rendezvous decide")
        elif not _MPI_NAME_RE.fullmatch(name):
            problems.append(f"{name or '(no name)'} may not be set: only {allowed} may")
        elif refused:
            problems.append(f"{name} may not be set: a variable with {refused[0]} in its name "
                            "loads, reads or writes what its value names")
        elif equals and not _MPI_VALUE_RE.fullmatch(setting):
            problems.append(f"the value of {name} may only hold letters, digits and _ . , : ^ "
                            "+ - (no paths, quotes or shell characters)")
    if stray:
        problems.insert(0, f"{' '.join(stray)!r}: only -x NAME=VALUE (or -x NAME) pairs may be "
                           "added to mpirun, no other option")
    return problems
