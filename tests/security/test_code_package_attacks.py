"""Code packages made to attack whoever unpacks them, each refused with a problem that names
it, before anything is written (traingrid_node.code_package): paths and links leaving the
package, devices, bombs, headers that lie, a hash or entry point that does not match."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile

import pytest

from traingrid_node import code_package
from traingrid_node.code_package import PackageError, check, extract, inspect


def member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"",
           linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info, data


def archive(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    """A gzip tar holding ``members`` exactly as given: tarfile writes what it is told."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.size else None)
    return buffer.getvalue()


TRAIN = member("train.py", data=b"print('hi')\n")


@pytest.mark.parametrize(("members", "problem"), [
    ([TRAIN, member("../x", data=b"x")], "'../x': leads outside the package (..)"),
    ([TRAIN, member("lib/../../x", data=b"x")],
     "'lib/../../x': leads outside the package (..)"),
    ([TRAIN, member("/etc/cron.d/job", data=b"* * * * * root sh\n")],
     "'/etc/cron.d/job': an absolute path"),
    ([TRAIN, member("passwd", tarfile.SYMTYPE, linkname="/etc/passwd")],
     "'passwd': a link to '/etc/passwd', an absolute path"),
    ([TRAIN, member("lib", tarfile.DIRTYPE),
      member("lib/up", tarfile.SYMTYPE, linkname="../../home")],
     "'lib/up': a link to '../../home', outside the package"),
    # Each link inside on its own, but a/b leads up a folder: a/b/../.. is then above the top,
    # which a lexical check of the second link would not see.
    ([TRAIN, member("a", tarfile.DIRTYPE), member("a/b", tarfile.SYMTYPE, linkname=".."),
      member("escape", tarfile.SYMTYPE, linkname="a/b/../..")],
     "'escape': a link to 'a/b/../..', through the link 'a/b'"),
    ([TRAIN, member("out", tarfile.SYMTYPE, linkname="."),
      member("out/train.py", data=b"replaced through the link\n")],
     "'out/train.py': lies under the link 'out'"),
    ([TRAIN, member("shadow", tarfile.LNKTYPE, linkname="/etc/shadow")],
     "'shadow': a hard link to '/etc/shadow', outside the package"),
    ([TRAIN, member("shadow", tarfile.LNKTYPE, linkname="../../etc/shadow")],
     "'shadow': a hard link to '../../etc/shadow', outside the package"),
    ([member("early", tarfile.LNKTYPE, linkname="train.py"), TRAIN],
     "'early': a hard link to 'train.py', not a file before it in the package"),
    ([TRAIN, member("null", tarfile.CHRTYPE)],
     "'null': a character device, which a package may not hold"),
    ([TRAIN, member("disk", tarfile.BLKTYPE)],
     "'disk': a block device, which a package may not hold"),
    ([TRAIN, member("pipe", tarfile.FIFOTYPE)], "'pipe': a FIFO, which a package may not hold"),
    ([TRAIN, member("train.py", data=b"the second one wins on disk\n")],
     "'train.py': in the package twice"),
])
def test_an_archive_that_would_write_or_read_outside_is_refused(tmp_path, members, problem):
    crafted = archive(*members)

    assert problem in check(crafted)
    with pytest.raises(PackageError) as refused:
        extract(crafted, tmp_path / "out")
    assert problem in refused.value.problems
    assert not (tmp_path / "out").exists()


def test_every_problem_is_named_at_once():
    crafted = archive(member("../x", data=b"x"), member("/abs", data=b"y"),
                      member("dev", tarfile.CHRTYPE))

    assert check(crafted, "0" * 64, "missing.py") == [
        f"its sha256 is {hashlib.sha256(crafted).hexdigest()}, not '{'0' * 64}': these are "
        "not the bytes the package was named for",
        "'../x': leads outside the package (..)",
        "'/abs': an absolute path",
        "'dev': a character device, which a package may not hold",
        "the entry point 'missing.py' is not in the package",
    ]


def test_a_gzip_bomb_is_refused_from_its_headers_before_it_expands():
    honest = archive(TRAIN, member("zeros", data=bytes(64 * 2**20)))
    assert len(honest) < 100 * 2**10  # ~1000x
    bomb = honest[:-4] + (1024).to_bytes(4, "little")  # gzip's trailer claims 1 KiB

    inspection = inspect(bomb)

    assert inspection.problems == [
        f"its members declare over {100 * len(bomb)} bytes: over 100x its {len(bomb)} "
        "compressed bytes"]
    assert inspection.expanded_bytes < 2**20  # its data was never expanded


def test_a_header_that_lies_cannot_make_a_reader_expand_more_than_the_limit():
    # A GNU long-name header is no member: tarfile reads all of its declared data as the next
    # member's name, whatever the members declare; gzip's trailer claims 1 KiB.
    long_name = member("x" * 64, tarfile.GNUTYPE_LONGNAME)[0]
    long_name.size = 64 * 2**20
    raw = long_name.tobuf(tarfile.GNU_FORMAT) + bytes(64 * 2**20) + bytes(1024)
    lying = gzip.compress(raw, mtime=0)[:-4] + (1024).to_bytes(4, "little")
    limit = 100 * len(lying)

    inspection = inspect(lying)

    assert inspection.problems == [
        f"expands to over {limit} bytes: over 100x its {len(lying)} compressed bytes"]
    assert inspection.expanded_bytes <= limit + 1


def test_over_the_file_count_or_the_compressed_size_is_refused(monkeypatch):
    monkeypatch.setattr(code_package, "MAX_FILES", 3)
    monkeypatch.setattr(code_package, "MAX_COMPRESSED_BYTES", 100)
    crafted = archive(*(member(f"f{i}", data=b"x") for i in range(5)))

    assert check(crafted) == [
        f"{len(crafted)} bytes: over the limit of 100 compressed",
        "over the limit of 3 files and folders"]


@pytest.mark.parametrize(("entry_point", "problem"), [
    ("missing.py", "the entry point 'missing.py' is not in the package"),
    ("../train.py", "the entry point '../train.py' is outside the package: name a file in it, "
                    "relative to its top folder"),
    ("/train.py", "the entry point '/train.py' is outside the package: name a file in it, "
                  "relative to its top folder"),
    ("lib", "the entry point 'lib' is not a regular file"),
    ("start.py", "the entry point 'start.py' is not a regular file"),
])
def test_an_entry_point_must_be_a_file_of_the_package(entry_point, problem):
    crafted = archive(TRAIN, member("lib", tarfile.DIRTYPE),
                      member("start.py", tarfile.SYMTYPE, linkname="train.py"))

    assert check(crafted, entry_point=entry_point) == [problem]
    assert check(crafted, entry_point="./train.py") == []


def test_bytes_that_are_not_a_gzip_tar_are_refused():
    assert check(b"PK\x03\x04 a zip") == ["not a gzip file"]
    problems = check(gzip.compress(b"not a tar archive" * 40, mtime=0))
    assert len(problems) == 1 and problems[0].startswith("not a readable gzip tar")
    truncated = archive(TRAIN, member("data", data=bytes(range(256)) * 64))[:-40]
    assert check(truncated)[0].startswith("not a readable gzip tar")


def test_a_package_whose_hash_does_not_match_is_not_unpacked(tmp_path):
    crafted = archive(TRAIN)

    with pytest.raises(PackageError, match="its sha256 is"):
        extract(crafted, tmp_path / "out", expected_sha256="f" * 64)

    assert not (tmp_path / "out").exists()
