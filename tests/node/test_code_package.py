"""Code packages built from real folders: the same bytes for the same files, what is left out,
`.traingridignore`, links, the limits, unpacking, and the keys a package lives at
(traingrid_node.code_package; the attacks on a package are in
tests/security/test_code_package_attacks.py)."""

from __future__ import annotations

import io
import os
import socket
import stat
import tarfile
from pathlib import Path

import pytest

from traingrid_node import code_package
from traingrid_node.code_package import PackageError, build, check, extract, inspect

HEX = "ab" * 32


def project(root: Path, order: tuple[str, ...] = ("train.py", "lib/model.py", "run.sh")
            ) -> Path:
    """A small project, its files made in ``order``."""
    contents = {"train.py": "import lib.model\nprint('train')\n",
                "lib/model.py": "WIDTH = 8\n", "run.sh": "#!/bin/sh\npython3 train.py\n"}
    for name in order:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(contents[name])
    (root / "run.sh").chmod(0o750)
    (root / "lib" / "empty").mkdir(exist_ok=True)
    return root


def members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_the_same_files_make_the_same_bytes_whatever_their_times_order_and_modes(tmp_path):
    first = project(tmp_path / "first")
    second = project(tmp_path / "second", ("run.sh", "lib/model.py", "train.py"))
    for number, path in enumerate(sorted(second.rglob("*"))):
        os.utime(path, (1_000_000 + number, 2_000_000 + number * 7919))
    (second / "train.py").chmod(0o600)  # not executable either way: stored 0644
    (second / "run.sh").chmod(0o700)  # executable either way: stored 0755

    assert build(first) == build(second)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another owner needs root")
def test_the_same_files_make_the_same_bytes_whoever_owns_them(tmp_path):
    first, second = project(tmp_path / "first"), project(tmp_path / "second")
    for path in second.rglob("*"):
        os.lchown(path, 4242, 4343)

    assert build(first) == build(second)


def test_members_carry_no_time_owner_or_name_of_this_machine(tmp_path):
    archive = build(project(tmp_path / "p"))

    # gzip's header: no file name (flags 0), time 0.
    assert archive[3] == 0 and archive[4:8] == b"\0\0\0\0"
    found = members(archive)
    assert list(found) == ["lib", "lib/empty", "lib/model.py", "run.sh", "train.py"]
    for member in found.values():
        assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (
            0, 0, 0, "", "")
    assert {name: stat.S_IMODE(m.mode) for name, m in found.items()} == {
        "lib": 0o755, "lib/empty": 0o755, "lib/model.py": 0o644, "run.sh": 0o755,
        "train.py": 0o644}


def test_git_caches_and_virtualenvs_are_left_out(tmp_path):
    root = project(tmp_path / "p")
    for folder in (".git/objects", "__pycache__", "lib/__pycache__", ".venv/bin", "venv/lib",
                   "env311/lib"):
        (root / folder).mkdir(parents=True)
        (root / folder / "x").write_text("left out")
    (root / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a venv by any name
    (root / "lib" / "model.pyc").write_bytes(b"\0")
    (root / "lib" / ".git").write_text("gitdir: ../.git/worktrees/lib\n")  # a worktree's file
    (root / "environment.py").write_text("kept\n")

    names = set(members(build(root)))

    assert names == {"lib", "lib/empty", "lib/model.py", "run.sh", "train.py", "environment.py"}


def test_traingridignore_leaves_out_what_its_patterns_name(tmp_path):
    root = project(tmp_path / "p")
    (root / ".traingridignore").write_text(
        "# outputs of earlier runs\n\n*.log\ncheckpoints/\n/build\ndocs/*.md\n")
    for name in ("train.log", "lib/debug.log", "checkpoints/epoch-1.pt",
                 "lib/checkpoints/epoch-2.pt", "build/x.o", "lib/build/kept.py",
                 "docs/a.md", "docs/img.png", "notes/docs/kept.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / "lib" / "checkpoints.txt").write_text("a file: the folder pattern keeps it")

    names = set(members(build(root)))

    assert {"lib/build", "lib/build/kept.py", "docs", "docs/img.png", "notes/docs/kept.md",
            "lib/checkpoints.txt", ".traingridignore"} <= names
    assert not names & {"train.log", "lib/debug.log", "checkpoints", "lib/checkpoints",
                        "build", "docs/a.md"}


def test_a_traingridignore_line_it_cannot_take_is_named(tmp_path):
    root = project(tmp_path / "p")
    (root / ".traingridignore").write_text("*.log\n!keep.log\n/\n")

    with pytest.raises(PackageError) as refused:
        build(root)

    assert refused.value.problems == [
        ".traingridignore line 2 '!keep.log': `!` (keeping what a pattern left out) is not "
        "supported",
        ".traingridignore line 3 '/': matches nothing"]


def test_a_link_inside_is_kept_as_a_link_to_where_it_leads(tmp_path):
    root = project(tmp_path / "p")
    (root / "lib" / "current").symlink_to("model.py")
    (root / "alias").symlink_to("lib/current")  # through another link: stored to its end
    (root / "data").symlink_to(root / "lib")  # absolute, inside: stored relative

    found = members(build(root))

    assert (found["lib/current"].linkname, found["alias"].linkname,
            found["data"].linkname) == ("model.py", "lib/model.py", "lib")
    assert all(found[name].issym() for name in ("lib/current", "alias", "data"))


def test_links_leaving_the_project_and_special_files_are_refused_all_at_once(tmp_path):
    root = project(tmp_path / "p")
    outside = tmp_path / "secret.txt"
    outside.write_text("not the project's")
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "lib" / "secret").symlink_to("../../secret.txt")
    (root / "up").symlink_to("..")
    os.mkfifo(root / "pipe")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(root / "lib" / "sock"))

        with pytest.raises(PackageError) as refused:
            build(root)

    assert refused.value.problems == [
        "'lib/secret': a link to '../../secret.txt', which is outside the project",
        "'lib/sock': a socket cannot go in a package",
        "'passwd': a link to '/etc/passwd', which is outside the project",
        "'pipe': a FIFO cannot go in a package",
        "'up': a link to '..', which is outside the project",
    ]


def test_a_refused_file_in_a_left_out_folder_does_not_count(tmp_path):
    root = project(tmp_path / "p")
    (root / ".venv").mkdir()
    (root / ".venv" / "python").symlink_to("/usr/bin/python3")

    assert "train.py" in members(build(root))


def test_over_the_limits_is_refused_naming_each(tmp_path, monkeypatch):
    root = project(tmp_path / "p")
    monkeypatch.setattr(code_package, "MAX_FILES", 3)
    monkeypatch.setattr(code_package, "MAX_EXPANDED_BYTES", 4000)
    monkeypatch.setattr(code_package, "MAX_PATH_LENGTH", 10)

    with pytest.raises(PackageError) as refused:
        build(root)

    assert refused.value.problems == [
        "'lib/model.py'…: its path is over 10 characters",
        "5 files and folders: over the limit of 3",
        "4096 bytes expanded: over the limit of 4000",
    ]


def test_a_project_that_compresses_too_well_is_refused_as_a_reader_would(tmp_path):
    root = project(tmp_path / "p")
    (root / "zeros.bin").write_bytes(bytes(20 * 2**20))

    with pytest.raises(PackageError) as refused:
        build(root)

    assert len(refused.value.problems) == 1
    assert "over 100x its" in refused.value.problems[0]


def test_a_package_unpacks_as_it_was_packed(tmp_path):
    root = project(tmp_path / "p")
    (root / "lib" / "current").symlink_to("model.py")
    archive = build(root)

    inspection = extract(archive, tmp_path / "out", code_package.digest(archive), "train.py")

    out = tmp_path / "out"
    assert (out / "train.py").read_text() == (root / "train.py").read_text()
    assert (out / "lib" / "current").read_text() == "WIDTH = 8\n"
    assert os.access(out / "run.sh", os.X_OK) and (out / "lib" / "empty").is_dir()
    assert (inspection.problems, inspection.files, inspection.members) == ([], 3, 6)


def test_unpacking_wants_an_empty_folder(tmp_path):
    archive = build(project(tmp_path / "p"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "train.py").write_text("someone else's")

    with pytest.raises(PackageError, match="is not an empty folder to unpack into"):
        extract(archive, tmp_path / "out")

    assert (tmp_path / "out" / "train.py").read_text() == "someone else's"


def test_what_was_built_passes_every_check(tmp_path):
    archive = build(project(tmp_path / "p"))

    assert check(archive, code_package.digest(archive), "lib/model.py") == []
    assert inspect(archive).expanded_bytes % tarfile.RECORDSIZE == 0


def test_a_package_key_is_its_hash_under_code():
    assert code_package.key_for(HEX) == f"code/sha256/{HEX}.tar.gz"
    uri = code_package.parse_uri(f"s3://my-data.bucket/code/sha256/{HEX}.tar.gz")
    assert (uri.bucket, uri.key, uri.sha256) == ("my-data.bucket", f"code/sha256/{HEX}.tar.gz",
                                                 HEX)
    assert str(uri) == f"s3://my-data.bucket/code/sha256/{HEX}.tar.gz"


@pytest.mark.parametrize(("uri", "problems"), [
    (f"https://bucket/code/sha256/{HEX}.tar.gz",
     [f"'https://bucket/code/sha256/{HEX}.tar.gz' is not an s3:// URI"]),
    (f"s3://bucket/datasets/{HEX}.tar.gz",
     [f"'datasets/{HEX}.tar.gz' is not a code package's key: code/sha256/<sha256>.tar.gz"]),
    (f"s3://bucket/code/sha256/../../{HEX}.tar.gz",
     [f"'../../{HEX}' is not a sha256: 64 lowercase hex digits"]),
    (f"s3://Bad_Bucket/code/sha256/{HEX.upper()}.tar.gz",
     ["'Bad_Bucket' is not an S3 bucket name",
      f"'{HEX.upper()}' is not a sha256: 64 lowercase hex digits"]),
    ("s3://bucket/code/sha256/abc.tar.gz", ["'abc' is not a sha256: 64 lowercase hex digits"]),
])
def test_a_uri_that_is_not_a_package_under_code_is_refused(uri, problems):
    with pytest.raises(PackageError) as refused:
        code_package.parse_uri(uri)

    assert refused.value.problems == problems


def test_a_key_needs_a_sha256():
    with pytest.raises(PackageError, match="'x' is not a sha256"):
        code_package.key_for("x")


def test_a_folder_that_is_not_there_is_named(tmp_path):
    with pytest.raises(PackageError, match="is not a folder"):
        build(tmp_path / "missing")
