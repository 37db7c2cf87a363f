"""Sizing the file system for the job's reads: the rate, the record size, the cheapest tier
that feeds the job, and a warning when the request's own file system starves it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from traingrid.settings import Settings
from traingrid.training import plan_step
from traingrid.training.plan import DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid.training.sizing import DEFAULT_RECORD_BYTES, read_demand, size_file_system
from traingrid.validation import parse
from traingrid.vocabulary.catalog import FSX_TIERS, INSTANCE_TYPES, is_valid_capacity

GB = 10**9
UNBOUNDED = 10**9  # an FSx storage quota no file system reaches
IMAGENET = DatasetSize(objects=1281, bytes=150 * GB)  # 1,281 TFRecord shards


def request(**fields):
    return parse(TrainingRunRequest, {"dataset": "s3://bkt/imagenet/", **fields})


def test_the_rate_is_the_catalogs_per_gpu_figure_unless_the_request_states_one():
    demand = read_demand(request(), IMAGENET)
    assert demand.images_per_s == 20 * 8 * INSTANCE_TYPES["p4d.24xlarge"].gpu_images_per_s
    assert demand.images_per_s_source == "catalog (p4d.24xlarge)"
    own = read_demand(request(expected_images_per_s_per_gpu=625), IMAGENET)
    assert (own.images_per_s, own.images_per_s_source) == (100_000, "request")
    # ~100,000 images/s of ~110 KB records: ~11 GB/s
    assert own.required_mb_s == pytest.approx(100_000 * DEFAULT_RECORD_BYTES / 1e6)


def test_the_record_size_comes_from_records_objects_or_the_default():
    shards = read_demand(request(), IMAGENET)
    assert (shards.record_bytes, shards.record_bytes_source) == (
        DEFAULT_RECORD_BYTES, "default (ImageNet-like JPEG)")
    counted = read_demand(request(dataset_records=1_281_167), IMAGENET)
    assert counted.record_bytes == round(150 * GB / 1_281_167)
    jpegs = read_demand(request(), DatasetSize(objects=1_000_000, bytes=90 * GB))
    assert (jpegs.record_bytes, jpegs.records) == (90_000, 1_000_000)


@pytest.mark.parametrize(("per_gpu", "kind", "capacity"), [
    # 160 GPUs × 1 image/s: the dataset's 150 GB (+25%) fit the smallest SCRATCH_2
    (1, "SCRATCH_2", 1200),
    # 160 × 625 × 110 KB = 11,000 MB/s at 200 MB/s/TiB: 55 TiB → 57,600 GiB
    (625, "SCRATCH_2", 57_600),
    # 160 × 1,200 × 110 KB = 21,120 MB/s → 110,400 GiB
    (1200, "SCRATCH_2", 110_400),
])
def test_the_cheapest_file_system_that_feeds_the_job_is_chosen(per_gpu, kind, capacity):
    sizing = size_file_system(request(expected_images_per_s_per_gpu=per_gpu), IMAGENET,
                              UNBOUNDED)
    assert sizing.meets and not sizing.warnings
    assert (sizing.choice.tier.deployment_type, sizing.choice.capacity_gib) == (kind, capacity)
    assert is_valid_capacity(sizing.choice.tier.deployment_type, capacity)
    # Any smaller valid SCRATCH_2 would starve the job.
    if capacity > 1200:
        assert (capacity - 2400) / 1024 * 200 < sizing.demand.required_mb_s


def test_a_persistent_type_takes_the_cheapest_throughput_per_tib_that_feeds_the_job():
    slow = size_file_system(request(expected_images_per_s_per_gpu=1,
                                    fsx={"deployment_type": "PERSISTENT_1"}), IMAGENET)
    assert slow.choice.tier.mb_s_per_tib == 50  # capacity-bound: the cheapest per GB
    fast = plan_run(request(fsx={"deployment_type": "PERSISTENT_1"}), run="r",
                    execution_arn="a", dataset=IMAGENET, now=datetime.now(UTC),
                    fsx_quota_gib=UNBOUNDED)
    lustre = fast["file_system"]["lustre_configuration"]
    assert (lustre["DeploymentType"], lustre["PerUnitStorageThroughput"]) == ("PERSISTENT_1",
                                                                                200)
    assert fast["reads"]["meets"]


def test_a_cheaper_tier_a_run_cannot_create_is_named_not_chosen():
    sizing = size_file_system(request(), IMAGENET, UNBOUNDED)
    assert sizing.choice.tier.import_path
    assert any("PERSISTENT_2" in note and "data repository association" in note
               for note in sizing.notes)
    assert not any(t.import_path for t in FSX_TIERS if t.deployment_type == "PERSISTENT_2")


def test_an_explicit_file_system_that_starves_the_job_wins_with_a_warning():
    plan = plan_run(request(fsx={"storage_capacity_gib": 1200}), run="r", execution_arn="a",
                    dataset=IMAGENET, now=datetime.now(UTC))
    reads = plan["reads"]
    assert plan["file_system"]["storage_capacity_gib"] == 1200
    assert not reads["meets"]
    assert reads["throughput_mb_s"] == pytest.approx(1200 / 1024 * 200, abs=0.1)
    [warning] = reads["warnings"]
    assert "43,766 MB/s short of the 44,000 MB/s" in warning
    # Reads, not the GPUs, set the epoch's length.
    assert reads["epoch_s"] > reads["compute_epoch_s"]


def test_the_first_epoch_reads_from_s3_lazily_or_after_a_preload():
    reads = plan_run(request(expected_images_per_s_per_gpu=625, fsx={
        "storage_capacity_gib": 2400}), run="r", execution_arn="a", dataset=IMAGENET,
        now=datetime.now(UTC))["reads"]
    read_s = 150 * GB / (2400 / 1024 * 200 * 1e6)
    assert reads["preload_s"] == pytest.approx(read_s, abs=0.1)
    assert reads["first_epoch_preloaded_s"] == pytest.approx(read_s, abs=0.1)
    assert reads["first_epoch_lazy_s"] == pytest.approx(2 * read_s, abs=0.1)


def test_a_preload_asks_the_main_node_to_load_the_dataset_before_training():
    def env(**fsx):
        return plan_run(request(fsx=fsx), run="r", execution_arn="a", dataset=IMAGENET,
                        now=datetime.now(UTC))["job"]["environment"]
    assert env(preload=True)["TRAINGRID_PRELOAD_DIR"] == "/fsx"
    assert "TRAINGRID_PRELOAD_DIR" not in env()


def test_a_job_no_file_system_can_feed_gets_the_fastest_and_says_by_how_much():
    sizing = size_file_system(request(nodes=500, instance_type="p5.48xlarge",
                                      expected_images_per_s_per_gpu=100_000), IMAGENET,
                              UNBOUNDED)
    assert not sizing.meets
    assert is_valid_capacity(sizing.choice.tier.deployment_type, sizing.choice.capacity_gib)
    assert sizing.choice.capacity_gib > 990_000
    [warning] = sizing.warnings
    assert "the largest file system FSx makes" in warning and "MB/s short" in warning


def test_an_explicit_deployment_type_is_sized_in_its_own_increments():
    sizing = size_file_system(request(expected_images_per_s_per_gpu=625,
                                      fsx={"deployment_type": "PERSISTENT_1",
                                           "per_unit_storage_throughput": 200}), IMAGENET)
    # 11,000 MB/s at 200 MB/s/TiB: 55 TiB = 56,320 GiB → the next multiple of 2,400
    assert (sizing.choice.tier.deployment_type, sizing.choice.capacity_gib) == (
        "PERSISTENT_1", 57_600)
    assert not any("PERSISTENT_2" in note for note in sizing.notes)


def test_the_plan_step_logs_a_file_system_that_starves_the_job(monkeypatch):
    warned = []
    monkeypatch.setattr(plan_step, "size_part", lambda bucket, prefix, *_: (None, IMAGENET))
    monkeypatch.setattr(plan_step.logger, "warning",
                        lambda message, *args, extra: warned.append((message % args, extra)))
    settings = Settings(data_bucket="bkt", fsx_storage_quota_gib=UNBOUNDED)
    event = {"run": "r", "execution_arn": "arn", "request": {"dataset": "s3://bkt/imagenet/"}}
    plan_step.plan(event, settings)
    assert warned == []
    plan_step.plan(event | {"request": {"dataset": "s3://bkt/imagenet/",
                                        "fsx": {"storage_capacity_gib": 1200}}}, settings)
    [(message, figures)] = warned
    assert message.startswith("file system starves the job: the file system gives 234 MB/s")
    assert figures == {"required_mb_s": 44000.0, "throughput_mb_s": 234.4}


def test_the_file_system_stays_within_the_accounts_fsx_quota_and_names_the_increase():
    # 160 V100s read 21,120 MB/s: 110,400 GiB of SCRATCH_2, above the default quota.
    sizing = size_file_system(request(instance_type="p3.16xlarge"), IMAGENET)

    assert sizing.choice.capacity_gib == 100_800  # the largest SCRATCH_2 within 100,800
    assert not sizing.meets
    short, quota = sizing.warnings
    assert "the account's FSx storage quota holds the job" in short
    assert quota.startswith('the file system is held to 100,800 GiB by the account\'s FSx '
                            'quota "Lustre Scratch storage capacity" (L-AD2FC696), 100,800 GiB')
    assert ("aws service-quotas request-service-quota-increase --service-code fsx "
            "--quota-code L-AD2FC696 --desired-value 110400") in quota
    # A lower applied value lowers the file system with it.
    assert size_file_system(request(instance_type="p3.16xlarge"), IMAGENET,
                            50_000).choice.capacity_gib == 48_000


def test_the_plan_step_sizes_within_the_stacks_fsx_quota(monkeypatch):
    monkeypatch.setattr(plan_step, "size_part", lambda bucket, prefix, *_: (None, IMAGENET))
    monkeypatch.setattr(plan_step.logger, "warning", lambda *args, **kwargs: None)
    event = {"run": "r", "execution_arn": "arn", "request": {"dataset": "s3://bkt/imagenet/"}}
    settings = Settings.from_env({"DATA_BUCKET": "bkt", "FSX_STORAGE_QUOTA_GIB": "24000"})

    planned = plan_step.plan(event, settings)

    assert planned["file_system"]["storage_capacity_gib"] == 24_000
    # 20 p4d.24xlarge (the default) read 44,000 MB/s: 225,600 GiB of SCRATCH_2.
    assert any("--desired-value 225600" in w for w in planned["reads"]["warnings"])


def test_a_file_system_the_dataset_needs_beyond_the_quota_says_fsx_will_refuse_it():
    huge = DatasetSize(objects=100_000, bytes=120_000 * GB)  # 136,000 GiB with headroom
    sizing = size_file_system(request(expected_images_per_s_per_gpu=1), huge)

    assert sizing.choice.capacity_gib > 100_800  # never smaller than the dataset
    [refused] = [w for w in sizing.warnings if "ServiceLimitExceeded" in w]
    assert "above the account's FSx quota" in refused and "L-AD2FC696" in refused
    explicit = size_file_system(request(fsx={"storage_capacity_gib": 2400}), IMAGENET, 1200)
    assert any("2,400 GiB is above" in w for w in explicit.warnings)
