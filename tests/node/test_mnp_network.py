"""Which interface the ranks talk on: the one that holds the node's address, never the
ECS agent's link-local ``ecs-eth0`` of an AWS Batch multi-node container."""

import json
import sys
from pathlib import Path

import pytest

from tests.node.conftest import Netns, needs_netns
from traingrid_node.config import parse_config
from traingrid_node.launch import build_mpirun_command, launcher_env
from traingrid_node.network import Interface, NodeNetwork, choose_interface, interface_for
from traingrid_node.node import check_same_interface
from traingrid_node.rendezvous import Member
from traingrid_node.status import ConfigError, NetworkError

MNP = Path(__file__).resolve().parents[2] / "containers" / "mnp"
BATCH_CONTAINER = [
    Interface("lo", "127.0.0.1"),
    Interface("ecs-eth0", "169.254.172.2"),
    Interface("eth0", "10.0.1.27"),
]


def test_the_interface_that_holds_the_address_is_chosen_not_the_ecs_agents() -> None:
    assert interface_for("10.0.1.27", BATCH_CONTAINER) == "eth0"
    assert interface_for("169.254.172.2", BATCH_CONTAINER) == "ecs-eth0"


def test_no_interface_holding_the_address_is_an_error_naming_every_interface() -> None:
    with pytest.raises(NetworkError, match=r"10\.0\.1\.99 \(IPv4 interfaces: lo 127\.0\.0\.1, "
                                           r"ecs-eth0 169\.254\.172\.2, eth0 10\.0\.1\.27\)"):
        interface_for("10.0.1.99", BATCH_CONTAINER)


def test_the_jobs_own_interface_wins_if_this_node_has_it() -> None:
    assert choose_interface("10.0.1.27", "ecs-eth0", BATCH_CONTAINER) == "ecs-eth0"
    with pytest.raises(ConfigError, match="TRAINGRID_INTERFACE=ens5 has no IPv4 address"):
        choose_interface("10.0.1.27", "ens5", BATCH_CONTAINER)


def test_every_channel_of_the_mpirun_line_is_pinned_to_the_interface() -> None:
    command = build_mpirun_command(hostfile="h", num_processes=2, train_command=["t"],
                                   interface="eth0")
    pairs = set(zip(command, command[1:], strict=False))
    assert {("btl_tcp_if_include", "eth0"), ("oob_tcp_if_include", "eth0"),
            ("-x", "NCCL_SOCKET_IFNAME=eth0"), ("-x", "GLOO_SOCKET_IFNAME=eth0")} <= pairs


def test_mca_parameters_of_the_job_replace_the_nodes_as_open_mpi_takes_each_once() -> None:
    extra = ["--mca", "oob_tcp_if_include", "ens5", "-mca", "btl_tcp_if_exclude", "lo"]
    command = build_mpirun_command(hostfile="h", num_processes=2, train_command=["t"],
                                   interface="eth0", extra_mpi_params=extra)
    assert command.count("oob_tcp_if_include") == 1
    assert "btl_tcp_if_include" not in command  # an include list beside an exclude list fails


def test_ranks_started_by_torchrun_get_the_interface_unless_the_job_names_its_own() -> None:
    env = {"AWS_BATCH_JOB_NODE_INDEX": "1", "AWS_BATCH_JOB_NUM_NODES": "2",
           "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
           "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "10.0.1.5",
           "TRAINGRID_LAUNCHER": "torchrun", "TRAINGRID_TRAIN_COMMAND": "t"}
    network = NodeNetwork("10.0.1.27", "eth0")
    ranks = launcher_env(parse_config(env), 1, "10.0.1.5", network)
    assert (ranks["NCCL_SOCKET_IFNAME"], ranks["GLOO_SOCKET_IFNAME"]) == ("eth0", "eth0")
    own = launcher_env(parse_config({**env, "NCCL_SOCKET_IFNAME": "^docker"}), 1, "10.0.1.5",
                       network)
    assert (own["NCCL_SOCKET_IFNAME"], own["GLOO_SOCKET_IFNAME"]) == ("^docker", "eth0")


def test_mpirun_needs_one_interface_name_on_every_node() -> None:
    check_same_interface(NodeNetwork("10.0.1.5", "eth0"), [Member(1, "10.0.1.6", 1, "eth0")])
    with pytest.raises(NetworkError, match=r"node 2 \(ens5\)"):
        check_same_interface(NodeNetwork("10.0.1.5", "eth0"),
                             [Member(1, "10.0.1.6", 1, "eth0"), Member(2, "10.0.1.7", 1, "ens5")])


CHOOSE = """
import json
from traingrid_node.network import ipv4_interfaces, node_network, source_address_toward
source = source_address_toward("10.77.0.1")
print(json.dumps({"table": [[i.name, i.address] for i in ipv4_interfaces()],
                  "source": source, "chosen": node_network(source, None).interface,
                  "agent": source_address_toward("169.254.172.1")}))
"""


@needs_netns
def test_in_a_namespace_laid_out_like_a_batch_container_eth0_is_chosen(netns: Netns) -> None:
    result = netns.run("env", f"PYTHONPATH={MNP}", sys.executable, "-c", CHOOSE)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    # The kernel's own table, read with SIOCGIFCONF: both interfaces, every address.
    assert ["ecs-eth0", "169.254.172.2"] in found["table"]
    assert ["eth0", "10.77.0.11"] in found["table"] and ["eth0", "10.77.0.12"] in found["table"]
    assert (found["source"], found["chosen"]) == ("10.77.0.11", "eth0")
    assert found["agent"] == "169.254.172.2"  # the agent's network is ecs-eth0's, and only it
