"""moto's stores listed while another thread writes them (emulator/stores.py)."""

from __future__ import annotations

import pytest
from moto.batch.models import batch_backends
from moto.fsx.models import fsx_backends
from moto.logs.models import logs_backends
from moto.sagemaker.models import sagemaker_backends

from traingrid_local.emulator.session import ACCOUNT_ID, Emulator
from traingrid_local.emulator.stores import SHARED_STORES, SnapshotDict

GROUP = "/aws/batch/job"


def test_a_store_listed_while_it_grows_lists_what_it_held_when_the_listing_began():
    store = SnapshotDict(a=1, b=2)
    seen = []
    for key, value in store.items():
        store[f"added-after-{key}"] = value  # a plain dict raises here
        seen.append(key)
    assert seen == ["a", "b"]
    assert sorted(store) == ["a", "added-after-a", "added-after-b", "b"]
    assert list(store.values()) == [1, 2, 1, 2] and dict(store) == store


def test_describe_log_streams_answers_while_another_job_adds_a_stream(emulator: Emulator):
    """Between two streams of a DescribeLogStreams another thread (a job starting) adds one:
    the listing answers with the streams it began with, as CloudWatch Logs does."""
    logs = emulator.client("logs")
    logs.create_log_group(logGroupName=GROUP)
    for name in ("job-a/default/1", "job-b/default/2"):
        logs.create_log_stream(logGroupName=GROUP, logStreamName=name)
    group = logs_backends[ACCOUNT_ID][emulator.region].groups[GROUP]
    first = group.streams["job-a/default/1"]
    describe = first.to_describe_dict

    def describe_while_another_starts():
        group.streams.setdefault("job-c/default/3", first)  # the other thread's write
        return describe()

    first.to_describe_dict = describe_while_another_starts
    listed = logs.describe_log_streams(logGroupName=GROUP)["logStreams"]
    assert [s["logStreamName"] for s in listed] == ["job-a/default/1", "job-b/default/2"]
    assert len(logs.describe_log_streams(logGroupName=GROUP)["logStreams"]) == 3


@pytest.mark.parametrize(("owner", "attribute"), SHARED_STORES,
                         ids=[f"{o.__name__}.{a}" for o, a in SHARED_STORES])
def test_every_shared_store_of_a_new_backend_lists_a_snapshot(emulator: Emulator, owner,
                                                              attribute):
    emulator.client("logs").create_log_group(logGroupName=GROUP)
    logs = logs_backends[ACCOUNT_ID][emulator.region]
    instances = {"BatchBackend": batch_backends, "FSxBackend": fsx_backends,
                 "SageMakerModelBackend": sagemaker_backends, "LogsBackend": logs_backends}
    instance = (logs.groups[GROUP] if owner.__name__ == "LogGroup"
                else instances[owner.__name__][ACCOUNT_ID][emulator.region])
    assert isinstance(getattr(instance, attribute), SnapshotDict)
