"""A run's job can write anything anywhere on its file system, and export it (``lfs
hsm_archive``, or the run's own export task): what reaches S3 must stay under ``runs/<run>/``.
Otherwise job code could upload ``<prefix>/manifest.json`` and start runs, or overwrite a
dataset or another run's archive. The file system's export root is the run's own prefix, and
the trigger ignores every object under ``runs/``."""

from __future__ import annotations

from datetime import UTC, datetime

from moto.fsx.models import fsx_backends

from tests.emulator.conftest import emulator, start_emulator  # noqa: F401 - fixtures
from tests.emulator.helpers import create_lustre, create_network, wait_until
from traingrid.settings import TriggerSettings
from traingrid.training import trigger
from traingrid.training.archive import file_system_path, outputs_of
from traingrid.training.plan import DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid_local.emulator import fsx
from traingrid_local.emulator.session import ACCOUNT_ID

BUCKET = "training-data"
RUN = "resnet-1"
DATASET = f"s3://{BUCKET}/imagenet/"
# What job code might write on the file system, beside its outputs.
ATTACK = {
    "imagenet/manifest.json": b'{"command": ["sh", "-c", "id"]}',  # would start a run
    "train-00000-of-01024": b"poisoned",  # the dataset's own shard, at the root
    f"runs/{RUN}-other/manifest.json": b"{}",  # another run's archive
    "outputs/metrics.json": b'{"top1": 0.76}',
}


def the_plan() -> dict:
    request = TrainingRunRequest.model_validate({"dataset": DATASET})
    return dict(plan_run(request, run=RUN, execution_arn="arn", dataset=DatasetSize(1, 1 << 30),
                         now=datetime(2026, 11, 25, tzinfo=UTC)))


def keys(emulator) -> dict[str, bytes]:  # noqa: F811
    s3 = emulator.client("s3")
    listing = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            for o in listing}


def test_nothing_the_job_exports_lands_outside_its_runs_prefix(emulator):  # noqa: F811
    plan = the_plan()
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="imagenet/train-00000-of-01024", Body=b"clean")
    lustre = plan["file_system"]["lustre_configuration"]
    assert lustre["ExportPath"] == f"s3://{BUCKET}/runs/{RUN}/"
    fs_id = create_lustre(emulator, create_network(emulator).subnet_id, **lustre)["FileSystemId"]
    fs = fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs_id]
    fs.files.update(ATTACK)

    # The job archives everything it wrote (hsm_archive), and an export task covers the rest.
    fsx.export_files(ACCOUNT_ID, fs, dict(ATTACK))
    task = emulator.client("fsx").create_data_repository_task(
        FileSystemId=fs_id, Type="EXPORT_TO_REPOSITORY", Paths=[""],
        Report={"Enabled": False})["DataRepositoryTask"]
    wait_until(lambda: emulator.client("fsx").describe_data_repository_tasks(
        TaskIds=[task["TaskId"]])["DataRepositoryTasks"][0]["Lifecycle"] == "SUCCEEDED",
        what="the export")

    stored = keys(emulator)
    assert stored["imagenet/train-00000-of-01024"] == b"clean"
    outside = [k for k in stored if k != "imagenet/train-00000-of-01024"
               and not k.startswith(f"runs/{RUN}/")]
    assert outside == []
    assert stored[f"{outputs_of(plan['archive'])}metrics.json"] == ATTACK["outputs/metrics.json"]
    # And a manifest among them starts nothing.
    settings = TriggerSettings(data_bucket=BUCKET, training_run_state_machine_arn="arn")
    manifests = [k for k in stored if k.endswith("/manifest.json")]
    assert len(manifests) == 2
    for key in manifests:
        assert trigger.start_from_upload(BUCKET, key, "etag", settings) == {
            "status": "ignored", "key": key}


def test_checkpoints_are_found_on_the_file_system_where_the_job_wrote_them():
    archive = the_plan()["archive"]
    key = f"{outputs_of(archive)}checkpoints/epoch-0003.pt"
    assert file_system_path(archive, key) == "outputs/checkpoints/epoch-0003.pt"
    # A plan made before outputs had a folder of their own: its file system mirrors S3.
    older = {"bucket": BUCKET, "prefix": f"runs/{RUN}/", "file_system_path": f"runs/{RUN}"}
    assert file_system_path(older, f"runs/{RUN}/checkpoints/epoch-0003.pt") == \
        f"runs/{RUN}/checkpoints/epoch-0003.pt"
