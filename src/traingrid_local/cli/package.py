"""``traingrid package``: a project folder as a code package (docs/your-code.md), written to a
file, or put once in the data bucket of the stack ``traingrid serve`` emulates or of a deployed
one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from traingrid_local.api.client import DEFAULT_ENDPOINT, ApiClient, ApiError, Unreachable
from traingrid_local.cli.runs import (
    INVALID,
    RUN_FAILED,
    UNREACHABLE,
    UNREACHABLE_HINT,
    Endpoint,
    Region,
    fail,
)
from traingrid_local.cli.terminal import plain, stderr, stdout

if TYPE_CHECKING:
    from traingrid_local.api.code_uploads import Uploaded

commands = typer.Typer()


def _say(line: str, err: bool = False) -> None:
    # Paths as typed and files' names: text, never markup or a terminal's control.
    (stderr if err else stdout).print(plain(line), markup=False, highlight=False,
                                      soft_wrap=True)


def _upload(archive: bytes, endpoint: str, stack: str | None, region: str | None) -> Uploaded:
    from traingrid_local.api.code_uploads import UploadFailed, to_served, to_stack

    if stack is not None and not region:
        raise fail("package", "--stack needs --region (or AWS_REGION)", INVALID)
    try:
        if stack is not None:
            return to_stack(archive, stack, str(region))
        return to_served(archive, ApiClient(endpoint))
    except Unreachable as error:
        hint = "" if stack else f": {UNREACHABLE_HINT}"
        raise fail("package", f"{error}{hint}", UNREACHABLE) from None
    except (ApiError, UploadFailed) as error:
        raise fail("package", f"the package was not uploaded: {error}", RUN_FAILED) from None


@commands.command()
def package(
    directory: Annotated[Path, typer.Argument(help="The project folder to package.")],
    output: Annotated[Path | None, typer.Option(
        help="Write the archive to this file and upload nothing.")] = None,
    endpoint: Endpoint = DEFAULT_ENDPOINT,
    stack: Annotated[str | None, typer.Option(
        help="A deployed stack: upload to its data bucket (stack output DataBucketName) with "
             "your AWS credentials.")] = None,
    region: Region = None,
) -> None:
    """Package a project folder as a `.tar.gz` your runs can use, and upload it.

    The same files make the same bytes, whatever their times or owners. Left out: `.git`,
    `__pycache__`, `*.pyc`, virtualenvs and what `.traingridignore` names. A link leading out of
    the folder, a device, FIFO or socket, or a folder over the limits is refused (exit 2), every
    problem listed. The package goes to the data bucket as `code/sha256/<sha256>.tar.gz`, once:
    when it is there already, nothing is sent. The last line is its `s3://` URI.
    """
    from traingrid_node import code_package  # tarfile and the rest: this command's alone

    if output is not None and output.resolve().is_relative_to(directory.resolve()):
        # The next package of the folder would hold this one.
        raise fail("package", f"--output {output} is inside {directory}: write it elsewhere",
                   INVALID)
    try:
        archive = code_package.build(directory)
    except code_package.PackageError as error:
        for problem in error.problems:
            _say(f"  {problem}", err=True)
        count = len(error.problems)
        raise fail("package", f"{directory} cannot be packaged: {count} problem"
                              f"{'' if count == 1 else 's'} above", INVALID) from None
    inspection = code_package.inspect(archive)
    if output is not None:
        try:
            output.write_bytes(archive)
        except OSError as error:
            raise fail("package", f"cannot write {output}: {error.strerror}", INVALID
                       ) from None
        _say(f"wrote {output}")
    _say(f"sha256 {code_package.digest(archive)}")
    _say(f"{len(archive)} bytes, {inspection.files} files ({inspection.expanded_bytes} bytes "
         "expanded)")
    if output is not None:
        return
    uploaded = _upload(archive, endpoint, stack, region)
    _say("already in the data bucket: not uploaded again" if uploaded.existed
         else "uploaded to the data bucket", err=True)
    _say(str(uploaded.uri))
