"""traingrid plan: a dry run made here for a given dataset size, as a table or JSON."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from traingrid_local.cli.main import app

runner = CliRunner()
IMAGENET = ["--dataset", "s3://data/imagenet/", "--dataset-bytes", str(150 * 10**9),
            "--dataset-objects", "1281"]


def test_the_reference_job_gets_a_file_system_that_feeds_its_reads():
    # 110,400 GiB: above FSx's default storage quota, so the account has raised it.
    result = runner.invoke(app, ["plan", "--nodes", "20", "--instance-type", "p3.16xlarge",
                                 *IMAGENET, "--fsx-quota-gib", "110400", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["job"]["gpus"] == 160
    assert plan["input"]["required_mb_s"] == 160 * 1200 * 110_000 / 1e6
    assert plan["fsx"]["throughput_mb_s"] >= plan["input"]["required_mb_s"]
    assert plan["fsx"]["meets_reads"] and not plan["warnings"]
    assert plan["cost"]["usd_per_hour"] > plan["cost"]["compute_usd_per_hour"]


def test_on_fsxs_default_quota_the_reference_job_is_held_and_told_the_increase():
    result = runner.invoke(app, ["plan", "--nodes", "20", "--instance-type", "p3.16xlarge",
                                 *IMAGENET, "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["fsx"]["storage_capacity_gib"] == 100_800 and not plan["fsx"]["meets_reads"]
    assert any("--quota-code L-AD2FC696 --desired-value 110400" in w for w in plan["warnings"])


def test_a_manifest_with_its_own_file_system_is_planned_with_a_warning(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"dataset": "s3://data/imagenet/",
                                    "fsx": {"storage_capacity_gib": 1200}}))
    result = runner.invoke(app, ["plan", "--manifest", str(manifest), "--images-per-s-per-gpu",
                                 "625", "--dataset-bytes", str(150 * 10**9)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "SCRATCH_2, 1,200 GiB: 234 MB/s" in result.stdout
    assert "SHORT of the reads" in result.stdout
    assert "10,766 MB/s short of the 11,000 MB/s" in result.stdout


def test_the_request_file_is_taken_as_submit_takes_it_or_as_manifest(tmp_path):
    request = tmp_path / "run.json"
    request.write_text(json.dumps({"dataset": "s3://data/imagenet/", "nodes": 3}))
    planned = [runner.invoke(app, ["plan", *given, "--dataset-bytes", "1000", "--json"])
               for given in ([str(request)], ["--manifest", str(request)])]
    for result in planned:
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["job"]["nodes"] == 3
    both = runner.invoke(app, ["plan", str(request), "--manifest", str(request),
                               "--dataset-bytes", "1000"])
    assert both.exit_code == 2
    assert both.stderr == "traingrid plan: give the request once: as FILE or as --manifest\n"


def test_an_invalid_request_lists_its_problems_once_and_exits_2(tmp_path):
    result = runner.invoke(app, ["plan", "--dataset", "not-s3", "--nodes", "0",
                                 "--dataset-bytes", "1000"])
    assert result.exit_code == 2
    assert result.stderr.count("/dataset") == result.stderr.count("/nodes") == 1
    assert result.stderr.splitlines()[-1] == "traingrid plan: invalid request: 2 problems above"
    typo = tmp_path / "run.json"
    typo.write_text(json.dumps({"dataset": "s3://data/imagenet/", "nodse": 3}))
    result = runner.invoke(app, ["plan", str(typo), "--dataset-bytes", "1000"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "  /nodse: unknown field; did you mean 'nodes'?",
        "traingrid plan: invalid request: 1 problem above"]
    objects_alone = runner.invoke(app, ["plan", "--dataset", "s3://data/x/",
                                        "--dataset-objects", "3"])
    assert objects_alone.exit_code == 2 and "--dataset-bytes" in objects_alone.output


def test_a_manifest_that_cannot_be_read_is_named(tmp_path):
    result = runner.invoke(app, ["plan", "--manifest", str(tmp_path / "missing.json"),
                                 "--dataset-bytes", "1000"])
    assert result.exit_code == 2
    assert "traingrid plan: cannot read" in result.output
