"""``traingrid plan``: a dry run of a TrainingRun request, starting nothing.

With ``--dataset-bytes`` (and ``--dataset-objects``) the plan is made here, without AWS, for a
dataset of that size; otherwise the API plans it (``POST /plans``, then ``GET /plans/{token}``
while a large dataset is still being listed) on what is under the dataset prefix now: the
emulator's (``traingrid serve``) or a deployed stack's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from traingrid.errors import RequestInvalid
from traingrid.vocabulary.catalog import FSX_DEFAULT_STORAGE_QUOTA_GIB
from traingrid_local.api.client import DEFAULT_ENDPOINT
from traingrid_local.cli.runs import (
    INVALID,
    AsJson,
    Endpoint,
    Region,
    Stack,
    call,
    connect,
    fail,
    refused,
    request_body,
)
from traingrid_local.cli.terminal import DataTable, plain, stderr, stdout

if TYPE_CHECKING:
    from traingrid.training.plan import DatasetSize

commands = typer.Typer()


def local_plan(body: dict[str, Any], dataset: DatasetSize,
               fsx_quota_gib: int = FSX_DEFAULT_STORAGE_QUOTA_GIB) -> dict[str, Any]:
    # The planner and the request's model (pydantic, botocore): for a plan made here alone.
    from traingrid.training.plan_step import dry_run
    from traingrid.training.run_request import parse_request

    try:
        request = parse_request(body, commands=True, sent_as="traingrid plan")
    except RequestInvalid as invalid:
        raise refused("plan", invalid.listed, len(invalid.problems)) from None
    return dry_run(request, dataset, fsx_quota_gib=fsx_quota_gib)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"


def plan_table(plan: dict[str, Any]) -> DataTable:
    job, reads, fsx, cost = plan["job"], plan["input"], plan["fsx"], plan["cost"]
    dataset = plan["dataset"]
    table = DataTable(title=f"Plan for {plan['run']} (nothing started)", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("Job", f"{job['nodes']} × {job['instance_type']} = {job['gpus']} GPUs, "
                         f"{job['images_per_s']:,} images/s ({job['images_per_s_source']})")
    table.add_row("Dataset", f"{dataset['uri']}: {dataset['bytes'] / 1e9:,.1f} GB in "
                             f"{dataset['objects']:,} objects, {reads['records']:,} records of "
                             f"{reads['record_bytes'] / 1000:,.0f} KB "
                             f"({reads['record_bytes_source']})")
    table.add_row("Reads", f"{reads['required_mb_s']:,.0f} MB/s")
    per_unit = fsx["per_unit_storage_throughput"]
    burst = fsx["burst_mb_s"]
    table.add_row("File system", (
        f"{fsx['deployment_type']}{f' at {per_unit} MB/s/TiB' if per_unit else ''}, "
        f"{fsx['storage_capacity_gib']:,} GiB: {fsx['throughput_mb_s']:,.0f} MB/s"
        + (f" (burst {burst:,.0f})" if burst else "")
        + (" - meets the reads" if fsx["meets_reads"] else " - SHORT of the reads")))
    lazily = f"lazily from S3 {duration(fsx['first_epoch_lazy_s'])}"
    preloaded = (f"preloaded (lfs hsm_restore, {duration(fsx['preload_s'])} before training) "
                 f"{duration(fsx['first_epoch_preloaded_s'])}")
    table.add_row("First epoch", f"{preloaded} (this plan); {lazily}" if fsx["preload"]
                  else f"{lazily} (this plan); {preloaded} (fsx.preload)")
    table.add_row("Epoch", f"{duration(job['epoch_s'])} (GPUs alone "
                           f"{duration(job['compute_epoch_s'])}) × {job['epochs']} epochs")
    table.add_row("Cost", f"${cost['usd_per_hour']:,.2f}/h (compute "
                          f"${cost['compute_usd_per_hour']:,.2f}, FSx "
                          f"${cost['fsx_usd_per_hour']:,.2f}); at most ${cost['max_usd']:,.2f} "
                          f"({cost['training_hours']:g} h of training)")
    for note in plan["notes"]:
        table.add_row("Note", note)
    for warning in plan["warnings"]:
        table.add_row(Text("Warning", style="yellow"), warning)
    return table


@commands.command()
def plan(
    file: Annotated[Path | None, typer.Argument(
        help="A JSON request, as a manifest, POST /runs or `traingrid submit` takes it (its "
             "JSON Schema is in schema/).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="The same, as an option.")] = None,
    dataset: Annotated[str | None, typer.Option(help="S3 URI of the dataset prefix.")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes of the multi-node job.")] = None,
    instance_type: Annotated[str | None, typer.Option(help="Instance type.")] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs to train.")] = None,
    images_per_s_per_gpu: Annotated[int | None, typer.Option(
        help="Images/s each GPU trains at (default: the instance type's catalog figure).")
    ] = None,
    dataset_records: Annotated[int | None, typer.Option(
        help="Images in the dataset, when its objects are shards.")] = None,
    dataset_bytes: Annotated[int | None, typer.Option(
        help="Plan here, without AWS, for a dataset of this many bytes.")] = None,
    dataset_objects: Annotated[int | None, typer.Option(
        help="With --dataset-bytes: its objects (default 1).")] = None,
    fsx_quota_gib: Annotated[int, typer.Option(
        help="With --dataset-bytes: the account's FSx for Lustre storage quota to size "
             "within, as the stack's FsxStorageQuotaGiB (default: AWS's, 100,800 GiB).",
        min=1200)] = FSX_DEFAULT_STORAGE_QUOTA_GIB,
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """Show the plan a TrainingRun request would get, starting nothing.

    The plan gives the job, the file system sized for its reads, an epoch's time and the cost.
    With `--dataset-bytes` it is made here, without AWS; otherwise the API plans it on what is
    under the dataset prefix now.
    """
    if file is not None and manifest is not None:
        raise fail("plan", "give the request once: as FILE or as --manifest", INVALID)
    body = request_body(file or manifest, {
        "dataset": dataset, "nodes": nodes, "instance_type": instance_type, "epochs": epochs,
        "expected_images_per_s_per_gpu": images_per_s_per_gpu,
        "dataset_records": dataset_records}, "plan")
    if dataset_objects is not None and dataset_bytes is None:
        raise fail("plan", "--dataset-objects needs --dataset-bytes", INVALID)
    if dataset_bytes is not None:
        from traingrid.training.plan import DatasetSize  # the planner: for a plan made here

        if dataset_bytes < 1 or (dataset_objects is not None and dataset_objects < 1):
            raise fail("plan", "--dataset-bytes and --dataset-objects must be positive",
                       INVALID)
        result = local_plan(body, DatasetSize(dataset_objects or 1, dataset_bytes),
                            fsx_quota_gib)
    else:
        client = connect("plan", endpoint, stack, region)
        result = call("plan", client, "POST", "/plans", body)
        # 202: a dataset too large to list in one request; each GET lists on.
        while result.get("status") == "MEASURING":
            stderr.print(plain(f"listing {result['dataset']['uri']}: "
                               f"{result['dataset']['objects_so_far']:,} objects so far…"),
                         markup=False)
            result = call("plan", client, "GET", result["next"])
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        stdout.print(plan_table(result))
