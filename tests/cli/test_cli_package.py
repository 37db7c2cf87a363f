"""`traingrid package` through typer's runner: the archive written (the same bytes whatever the
files' times), a refused project's problems, the upload to a deployed stack's data bucket and to
a server's `POST /_emulator/code` over loopback HTTP, once; and that route's refusals.
`traingrid serve`'s own route is exercised in test_cli_api.py."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from traingrid_local.api import code_uploads
from traingrid_local.api.code_uploads import CODE_PATH, ServedCode
from traingrid_local.api.server import ApiServer
from traingrid_local.cli.main import app
from traingrid_node import code_package

runner = CliRunner()
REGION = "eu-west-1"
BUCKET = "traingrid-data-test"


def project(root):
    (root / "lib").mkdir(parents=True)
    (root / "train.py").write_text("import lib.model\n")
    (root / "lib" / "model.py").write_text("WIDTH = 8\n" * 40)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0" * 64)
    return root


def test_output_writes_the_same_bytes_whatever_the_files_times(tmp_path):
    root = project(tmp_path / "p")
    first = runner.invoke(app, ["package", str(root), "--output", str(tmp_path / "a.tar.gz")])
    for path in root.rglob("*"):
        os.utime(path, (1_500_000_000, 1_500_000_000))
    (root / "train.py").write_text((root / "train.py").read_text())  # written again: now
    second = runner.invoke(app, ["package", str(root), "--output", str(tmp_path / "b.tar.gz")])

    assert (first.exit_code, second.exit_code) == (0, 0), first.output + second.output
    archive = (tmp_path / "a.tar.gz").read_bytes()
    assert (tmp_path / "b.tar.gz").read_bytes() == archive
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert tar.getnames() == ["lib", "lib/model.py", "train.py"]
    assert second.stdout.splitlines() == [
        f"wrote {tmp_path / 'b.tar.gz'}", f"sha256 {hashlib.sha256(archive).hexdigest()}",
        f"{len(archive)} bytes, 2 files (10240 bytes expanded)"]


def test_a_project_that_cannot_be_packaged_exits_2_naming_every_problem(tmp_path):
    root = project(tmp_path / "p")
    (root / "lib" / "hosts").symlink_to("/etc/hosts")
    os.mkfifo(root / "pipe")

    result = runner.invoke(app, ["package", str(root), "--output", str(tmp_path / "a.tar.gz")])

    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "  'lib/hosts': a link to '/etc/hosts', which is outside the project",
        "  'pipe': a FIFO cannot go in a package",
        f"traingrid package: {root} cannot be packaged: 2 problems above"]
    assert not (tmp_path / "a.tar.gz").exists() and not result.stdout


def test_the_archive_is_not_written_into_the_folder_it_packages(tmp_path):
    root = project(tmp_path / "p")

    result = runner.invoke(app, ["package", str(root), "--output", str(root / "code.tar.gz")])

    assert result.exit_code == 2
    assert result.stderr == (f"traingrid package: --output {root / 'code.tar.gz'} is inside "
                             f"{root}: write it elsewhere\n")
    assert not (root / "code.tar.gz").exists()


def test_a_stack_needs_its_region(tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_REGION", raising=False)

    result = runner.invoke(app, ["package", str(project(tmp_path / "p")), "--stack", "tg"])

    assert result.exit_code == 2
    assert "--stack needs --region (or AWS_REGION)" in result.stderr


@pytest.fixture
def aws(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET,
                         CreateBucketConfiguration={"LocationConstraint": REGION})
        yield s3


def deployed(outputs):
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {name: {"Value": value} for name, value in outputs.items()}}
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="traingrid-prod", TemplateBody=json.dumps(template))


def test_the_package_goes_once_to_a_deployed_stacks_data_bucket(aws, tmp_path):
    deployed({"DataBucketName": BUCKET})
    root = project(tmp_path / "p")
    archive = code_package.build(root)
    key = code_package.key_for(code_package.digest(archive))
    options = ["package", str(root), "--stack", "traingrid-prod", "--region", REGION]

    first, second = runner.invoke(app, options), runner.invoke(app, options)

    assert (first.exit_code, second.exit_code) == (0, 0), first.output + second.output
    assert aws.get_object(Bucket=BUCKET, Key=key)["Body"].read() == archive
    assert first.stderr == "uploaded to the data bucket\n"
    assert second.stderr == "already in the data bucket: not uploaded again\n"
    assert first.stdout.splitlines()[-1] == second.stdout.splitlines()[-1] == (
        f"s3://{BUCKET}/{key}")


def test_a_stack_without_a_data_bucket_output_is_a_one_line_error(aws, tmp_path):
    deployed({"ApiUrl": "https://example.invalid/v1"})

    result = runner.invoke(app, ["package", str(project(tmp_path / "p")), "--stack",
                                 "traingrid-prod", "--region", REGION])

    assert result.exit_code == 3
    assert result.stderr == ("traingrid package: stack traingrid-prod in eu-west-1 has no "
                             "DataBucketName output\n")


def test_a_server_takes_the_package_in_parts_over_http(aws, tmp_path, monkeypatch):
    monkeypatch.setattr(code_uploads, "PART_BYTES", 64)  # several parts of a small package
    root = project(tmp_path / "p")
    archive = code_package.build(root)
    assert len(archive) > 2 * 64
    key = code_package.key_for(code_package.digest(archive))
    local = {("POST", CODE_PATH): ServedCode(aws, BUCKET)}
    with ApiServer(lambda event: {}, port=0, routes=[], local_routes=local) as server:
        first = runner.invoke(app, ["package", str(root), "--endpoint", server.url])
        second = runner.invoke(app, ["package", str(root), "--endpoint", server.url])

    assert (first.exit_code, second.exit_code) == (0, 0), first.output + second.output
    assert aws.get_object(Bucket=BUCKET, Key=key)["Body"].read() == archive
    assert (first.stderr, second.stderr) == (
        "uploaded to the data bucket\n", "already in the data bucket: not uploaded again\n")
    assert first.stdout.splitlines()[-1] == f"s3://{BUCKET}/{key}"


def part(sha256, size, offset, data):
    return {"sha256": sha256, "size": str(size), "offset": str(offset),
            "part": base64.b64encode(data).decode()}


def test_the_servers_route_stores_only_whole_packages_that_hash_to_their_name(aws):
    route = ServedCode(aws, BUCKET)
    data = b"a package's bytes"
    sha256 = hashlib.sha256(data).hexdigest()

    assert route({"sha256": "../x"})[0] == 400
    assert route(part(sha256, len(data), 5, data[5:])) == (409, {
        "message": "part at 5 does not follow the 0 bytes received: send from 0"})
    assert route(part(sha256, len(data), 0, data[:5]))[0] == 202
    assert route(part(sha256, len(data), 9, data[9:]))[0] == 409
    other = hashlib.sha256(b"x").hexdigest()
    assert route(part(other, len(data), 0, data)) == (400, {
        "message": f"the parts sent make {len(data)} bytes hashing to {sha256}, not "
                   f"{len(data)} hashing to {other}"})
    assert route(part(sha256, code_package.MAX_COMPRESSED_BYTES + 1, 0, data))[0] == 400
    assert route({"sha256": sha256})[1]["exists"] is False

    assert route(part(sha256, len(data), 0, data[:5]))[0] == 202
    assert route(part(sha256, len(data), 5, data[5:]))[0] == 201

    key = code_package.key_for(sha256)
    assert aws.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    assert route({"sha256": sha256}) == (200, {"uri": f"s3://{BUCKET}/{key}", "exists": True})
