"""Nothing accepted that can only fail later: what the services downstream refuse, what no
user means, and what would point the job's traffic elsewhere is a 400 from `traingrid serve`
before anything starts, over real HTTP.

- Fan-outs: the fewest instances a region's job may shrink to is at most the instances it
  starts with (the request's own numbers, or the campaign's where it sets none).
- Training limits of whole seconds: never 0 (SageMaker's MaxRuntimeInSeconds is at least 1).
- extra_mpi_params: no variable that chooses where ranks bootstrap, listen or rendezvous.
- Datasets: never a bucket's root, another run's archive (runs/), or a key with a control
  character or a bidirectional mark.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import serving
from tests.security.test_request_bounds import post, run_names
from traingrid_local.stack.environment import DEMO_BUCKET
from traingrid_local.stack.sample_campaign import CAMPAIGN

pytestmark = pytest.mark.e2e

DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory, 600, "edge", throttled=False) as api:  # 400s, not 429s
        yield api


def refused(served, target: str, body: dict) -> list[dict[str, str]]:
    """The problems of a 400 to ``body``; no run started."""
    before = run_names(served.url)
    status, data = post(served.url, target, body)
    assert status == 400, (status, data[:500])
    assert run_names(served.url) == before
    return json.loads(data)["problems"]


# The sample campaign starts its jobs on 10 instances and shrinks them to 5 at the fewest.
FANOUTS = {
    "min above count": ({"instance_count": 2, "min_instance_count": 3}, "",
                        "min_instance_count (3) must be at most instance_count (2)"),
    "min above the campaign's count": (
        {"min_instance_count": 11}, "/min_instance_count",
        "min_instance_count (11) must be at most instance_count (10 (the campaign's)"),
    "count below the campaign's min": (
        {"instance_count": 4}, "/instance_count",
        "the campaign's min_instance_count (5) must be at most instance_count (4)"),
}


@pytest.mark.parametrize("case", FANOUTS)
def test_a_fanout_never_shrinks_below_more_than_it_starts_with(served, case):
    body, pointer, words = FANOUTS[case]
    problems = refused(served, f"/campaigns/{CAMPAIGN}/runs", body)
    assert [p["pointer"] for p in problems] == [pointer], problems
    assert words in problems[0]["message"], problems


def test_a_fanout_within_the_campaigns_counts_is_accepted(served):
    status, data = post(served.url, f"/campaigns/{CAMPAIGN}/runs",
                        {"instance_count": 6, "min_instance_count": 6, "name": "edge-fanout"})
    assert status == 202, data[:500]


@pytest.mark.parametrize("target", ["/runs", "/plans"])
def test_a_training_limit_is_never_zero_seconds(served, target):
    body = {"dataset": DATASET, "nodes": 2, "timeouts": {"training_hours": 0.0001}}
    problems = refused(served, target, body)
    assert [p["pointer"] for p in problems] == ["/timeouts/training_hours"], problems
    assert "0.01" in problems[0]["message"]


ADDRESSES = ["NCCL_COMM_ID=10.0.0.9:5000", "NCCL_RAS_ADDR=0.0.0.0:28028",
             "HOROVOD_GLOO_RENDEZVOUS_ADDR=10.0.0.9", "HOROVOD_GLOO_RENDEZVOUS_PORT=5000",
             "HOROVOD_HOSTNAME=evil", "MASTER_ADDR=10.0.0.9", "MASTER_PORT=5000",
             "FI_TCP_PORT_LOW_RANGE=1024"]


@pytest.mark.parametrize("variable", ADDRESSES)
def test_mpi_variables_that_choose_where_ranks_meet_are_refused(served, variable):
    body = {"dataset": DATASET, "nodes": 2,
            "extra_mpi_params": f"-x NCCL_DEBUG=INFO -x {variable}"}
    problems = refused(served, "/runs", body)
    assert [p["pointer"] for p in problems] == ["/extra_mpi_params"], problems
    name = variable.split("=")[0]
    assert problems[0]["message"] == (
        f"{name} may not be set: it chooses where the job's ranks meet, listen or send (an "
        "address or port), which the job's own launcher and rendezvous decide")


def test_interface_choices_stay_allowed(served):
    """The node's own interfaces, no other host: a plan, nothing started."""
    params = ("-x NCCL_SOCKET_IFNAME=^docker0,lo -x GLOO_SOCKET_IFNAME=eth0 "
              "-x HOROVOD_GLOO_IFACE=eth0 -x NCCL_HOSTID=node-a")
    status, data = post(served.url, "/plans", {"dataset": DATASET, "nodes": 2,
                                               "extra_mpi_params": params})
    assert status == 200, data[:500]


DATASETS = {
    "the bucket's root": (f"s3://{DEMO_BUCKET}/", "is the bucket's root"),
    "the bucket, no slash": (f"s3://{DEMO_BUCKET}", "is the bucket's root"),
    "another run's archive": (f"s3://{DEMO_BUCKET}/runs/some-run/", "runs/ holds the runs'"),
    "the archives": (f"s3://{DEMO_BUCKET}/runs", "runs/ holds the runs'"),
    "the archives, past a slash": (f"s3://{DEMO_BUCKET}//runs/x/", "runs/ holds the runs'"),
    "NUL": (f"s3://{DEMO_BUCKET}/imagenet\x00/", "U+0000"),
    "tab": (f"s3://{DEMO_BUCKET}/image\tnet/", "U+0009"),
    "line feed": (f"s3://{DEMO_BUCKET}/imagenet\n/", "U+000A"),
    "C1 next line": (f"s3://{DEMO_BUCKET}/imagenet\x85/", "U+0085"),
    "right-to-left override": (f"s3://{DEMO_BUCKET}/ten\u202egnp.exe/", "U+202E"),
    "right-to-left isolate": (f"s3://{DEMO_BUCKET}/a\u2067b/", "U+2067"),
    "right-to-left mark": (f"s3://{DEMO_BUCKET}/a\u200fb/", "U+200F"),
}


@pytest.mark.parametrize("target", ["/runs", "/plans"])
@pytest.mark.parametrize("case", DATASETS)
def test_datasets_no_user_means_are_refused(served, case, target):
    dataset, words = DATASETS[case]
    problems = refused(served, target, {"dataset": dataset, "nodes": 2})
    assert [p["pointer"] for p in problems] == ["/dataset"], problems
    assert words in problems[0]["message"], problems
