"""Code packages (docs/your-code.md): a project folder as a deterministic gzip tar, where it
lives in the data bucket, and the checks it must pass before anything unpacks it.

One home for the rules: ``traingrid package`` builds with them, and whatever unpacks a package
checks and extracts with them. Standard library only: the node image ships it as it is.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import os
import posixpath
import re
import stat
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MAX_COMPRESSED_BYTES = 100 * 2**20  # the archive as uploaded
MAX_EXPANDED_BYTES = 2**30  # its tar stream once decompressed: headers, data and padding
MAX_FILES = 10_000  # members: files, folders and links
MAX_RATIO = 100  # expanded over compressed bytes, for a package that expands over...
RATIO_FLOOR_BYTES = 2**20  # ...1 MiB: a small tar's zero padding alone compresses ~70x
MAX_PATH_LENGTH = 1024  # characters of a member's path

PREFIX, SUFFIX = "code/sha256/", ".tar.gz"
IGNORE_FILE = ".traingridignore"
LEFT_OUT_DIRS = frozenset({".git", "__pycache__", ".venv", "venv"})
LEFT_OUT_FILES = ("*.pyc",)
VENV_MARKER = "pyvenv.cfg"  # any folder holding one is a virtualenv, whatever its name
FILE_MODE, EXEC_MODE, LINK_MODE = 0o644, 0o755, 0o777

_HEX = re.compile(r"[0-9a-f]{64}")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_KINDS = {tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device",
          tarfile.FIFOTYPE: "a FIFO"}
_SPECIAL = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
            stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}


class PackageError(ValueError):
    """A package refused; ``problems`` names every reason at once."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def digest(archive: bytes) -> str:
    return hashlib.sha256(archive).hexdigest()


def key_for(sha256_hex: str) -> str:
    """The data bucket's key of the package whose bytes hash to ``sha256_hex``."""
    if not _HEX.fullmatch(sha256_hex):
        raise PackageError([f"{sha256_hex!r} is not a sha256: 64 lowercase hex digits"])
    return f"{PREFIX}{sha256_hex}{SUFFIX}"


class PackageUri(NamedTuple):
    bucket: str
    key: str
    sha256: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def parse_uri(uri: str) -> PackageUri:
    """``s3://<bucket>/code/sha256/<hex>.tar.gz``, and nothing else: a package is read only
    from ``code/``, by the hash its bytes must have."""
    scheme, separator, rest = uri.partition("://")
    if scheme != "s3" or not separator:
        raise PackageError([f"{uri!r} is not an s3:// URI"])
    bucket, _, key = rest.partition("/")
    problems = [] if _BUCKET.fullmatch(bucket) else [f"{bucket!r} is not an S3 bucket name"]
    hex_digest = key[len(PREFIX):-len(SUFFIX)]
    if not (key.startswith(PREFIX) and key.endswith(SUFFIX)):
        problems.append(f"{key!r} is not a code package's key: {PREFIX}<sha256>{SUFFIX}")
    elif not _HEX.fullmatch(hex_digest):
        problems.append(f"{hex_digest!r} is not a sha256: 64 lowercase hex digits")
    if problems:
        raise PackageError(problems)
    return PackageUri(bucket, key, hex_digest)


@dataclass(frozen=True)
class _Pattern:
    glob: str
    whole_path: bool  # matched against the path from the project's folder, not a name
    folders_only: bool


def _ignore_patterns(text: str) -> tuple[list[_Pattern], list[str]]:
    """A ``.traingridignore``'s patterns, and the lines it cannot take."""
    patterns, problems = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            problems.append(f"{IGNORE_FILE} line {number} {line!r}: `!` (keeping what a "
                            f"pattern left out) is not supported")
            continue
        glob = line.strip("/")
        if not glob:
            problems.append(f"{IGNORE_FILE} line {number} {line!r}: matches nothing")
            continue
        patterns.append(_Pattern(glob, "/" in glob or line.startswith("/"), line.endswith("/")))
    return patterns, problems


def _left_out(path: str, folder: bool, patterns: list[_Pattern]) -> bool:
    name = posixpath.basename(path)
    # By name whatever they are: a worktree's .git is a file, a venv may be a link to one.
    if name in LEFT_OUT_DIRS or not folder and any(
            fnmatch.fnmatchcase(name, glob) for glob in LEFT_OUT_FILES):
        return True
    return any(fnmatch.fnmatchcase(path if p.whole_path else name, p.glob)
               for p in patterns if folder or not p.folders_only)


@dataclass(frozen=True)
class _Entry:
    path: str  # from the project's folder, POSIX
    source: Path
    kind: bytes  # tarfile's type
    size: int = 0
    mode: int = FILE_MODE
    target: str = ""  # a link's, relative to the link's folder


def _walk(root: Path, patterns: list[_Pattern]) -> tuple[list[_Entry], list[str]]:
    """What goes in, folders before what they hold, names sorted; what cannot go in."""
    entries: list[_Entry] = []
    problems: list[str] = []

    def visit(folder: Path, prefix: str) -> None:
        try:
            items = sorted(folder.iterdir(), key=lambda item: item.name)
        except OSError as error:
            problems.append(f"{prefix or './'!r}: cannot be listed ({error.strerror})")
            return
        for item in items:
            found = _entry(root, item, prefix + item.name, patterns)
            if isinstance(found, str):
                problems.append(found)
            elif found is not None:
                entries.append(found)
                if found.kind == tarfile.DIRTYPE:
                    visit(item, found.path + "/")

    visit(root, "")
    return entries, problems


def _entry(root: Path, item: Path, path: str, patterns: list[_Pattern]) -> _Entry | str | None:
    """What ``item`` puts in the package: an entry, None when it is left out, or why it cannot
    go in."""
    try:
        info = item.lstat()
    except OSError as error:  # gone since its folder was listed
        return f"{path!r}: {error.strerror}"
    folder = stat.S_ISDIR(info.st_mode)
    if _left_out(path, folder, patterns) or folder and (item / VENV_MARKER).exists():
        return None
    if path.encode(errors="replace").decode() != path:  # undecodable bytes, as surrogates
        return f"{path!r}: its name is not UTF-8"
    if folder:
        return _Entry(path, item, tarfile.DIRTYPE, mode=EXEC_MODE)
    if stat.S_ISLNK(info.st_mode):
        target = Path(os.path.realpath(item))
        if not target.is_relative_to(root):
            return f"{path!r}: a link to {str(item.readlink())!r}, which is outside the project"
        # Stored as where it leads, never through another link: a reader checks as much.
        relative = Path(os.path.relpath(target, item.parent)).as_posix()
        return _Entry(path, item, tarfile.SYMTYPE, mode=LINK_MODE, target=relative)
    if stat.S_ISREG(info.st_mode):
        if not os.access(item, os.R_OK):
            return f"{path!r}: cannot be read"
        executable = info.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return _Entry(path, item, tarfile.REGTYPE, info.st_size,
                      EXEC_MODE if executable else FILE_MODE)
    kind = next((kind for test, kind in _SPECIAL.items() if test(info.st_mode)), "special")
    return f"{path!r}: {kind} cannot go in a package"


def _blocks(size: int) -> int:
    return -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


def build(directory: str | os.PathLike[str]) -> bytes:
    """The project in ``directory`` as a gzip tar: the same bytes for the same files, whatever
    their times, owners or the order the file system lists them in. PackageError names every
    file that cannot go in and every limit it is over."""
    root = Path(os.path.realpath(directory))
    if not root.is_dir():
        raise PackageError([f"{str(directory)!r} is not a folder"])
    ignore = root / IGNORE_FILE
    patterns, problems = _ignore_patterns(
        ignore.read_text(errors="replace") if ignore.is_file() else "")
    entries, unfit = _walk(root, patterns)
    problems += unfit
    problems += [f"{e.path[:80]!r}…: its path is over {MAX_PATH_LENGTH} characters"
                 for e in entries if len(e.path) > MAX_PATH_LENGTH]
    if len(entries) > MAX_FILES:
        problems.append(f"{len(entries)} files and folders: over the limit of {MAX_FILES}")
    expanded = sum(tarfile.BLOCKSIZE + _blocks(e.size) for e in entries)
    if expanded > MAX_EXPANDED_BYTES:
        problems.append(f"{expanded} bytes expanded: over the limit of {MAX_EXPANDED_BYTES}")
    if problems:
        raise PackageError(problems)
    archive = _write(entries)
    problems = check(archive)  # the ratio, as whoever unpacks it will judge it
    if problems:
        raise PackageError(problems)
    return archive


def _write(entries: list[_Entry]) -> bytes:
    buffer = io.BytesIO()
    # No file name and time 0 in gzip's header: they would make the same files' bytes differ.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.path)
            info.type, info.mode, info.linkname = entry.kind, entry.mode, entry.target
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if entry.kind != tarfile.REGTYPE:
                tar.addfile(info)
                continue
            info.size = entry.size
            try:
                with entry.source.open("rb") as source:
                    tar.addfile(info, source)
            except OSError as error:  # it shrank, or went, while being read
                raise PackageError([f"{entry.path!r}: {error.strerror or error}"]) from None
            if buffer.tell() > MAX_COMPRESSED_BYTES:
                raise PackageError([f"over the limit of {MAX_COMPRESSED_BYTES} bytes "
                                    f"compressed, at {entry.path!r}"])
    return buffer.getvalue()


class _TooLarge(Exception):
    """More expanded than the limit allows."""


class _Expanded(io.RawIOBase):
    """The archive's decompressed stream, of which no more than ``limit`` bytes are ever
    made: whatever its headers say, reading it cannot fill a disk or memory."""

    def __init__(self, archive: bytes, limit: int) -> None:
        super().__init__()
        self._gzip = gzip.GzipFile(fileobj=io.BytesIO(archive), mode="rb")
        self.limit, self.count = limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self._gzip.read(min(len(view), self.limit + 1 - self.count))
        self.count += len(data)
        if self.count > self.limit:
            raise _TooLarge
        view[:len(data)] = data
        return len(data)


def _expansion_limit(compressed: int) -> tuple[int, str]:
    if MAX_RATIO * compressed >= MAX_EXPANDED_BYTES:
        return MAX_EXPANDED_BYTES, f"the limit of {MAX_EXPANDED_BYTES} bytes"
    if MAX_RATIO * compressed > RATIO_FLOOR_BYTES:
        return MAX_RATIO * compressed, f"{MAX_RATIO}x its {compressed} compressed bytes"
    return RATIO_FLOOR_BYTES, f"the {RATIO_FLOOR_BYTES} bytes any package may expand to"


def _name(member: str) -> str:
    while member.startswith("./"):
        member = member[2:]
    return member.rstrip("/")


def _inside(folder: str, target: str, links: set[str]) -> str | None:
    """Why ``target``, taken from ``folder`` of the package, leads out of it or through one of
    its ``links`` (where a lexical check is fooled); None when it does neither."""
    if target.startswith("/"):
        return "an absolute path"
    parts, walked = [p for p in folder.split("/") if p], False
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if walked and (current := "/".join(parts)) in links:
            return f"through the link {current!r}"
        if part == "..":
            if not parts:
                return "outside the package"
            parts.pop()
        else:
            parts.append(part)
        walked = True
    return None


@dataclass(frozen=True)
class Inspection:
    problems: list[str]
    files: int  # regular files
    members: int  # files, folders and links
    expanded_bytes: int  # the tar stream, decompressed


def inspect(archive: bytes, expected_sha256: str | None = None,
            entry_point: str | None = None) -> Inspection:
    """Every problem of the package at once (empty: safe to extract), and what it holds."""
    problems, found = [], digest(archive)
    if expected_sha256 is not None and found != expected_sha256:
        problems.append(f"its sha256 is {found}, not {expected_sha256!r}: these are not the "
                        "bytes the package was named for")
    if len(archive) > MAX_COMPRESSED_BYTES:
        problems.append(f"{len(archive)} bytes: over the limit of {MAX_COMPRESSED_BYTES} "
                        "compressed")
    # gzip's trailer is not asked its size: it is the size mod 2**32, and may lie.
    limit, why = _expansion_limit(len(archive))
    members: dict[str, tarfile.TarInfo] = {}
    expanded = 0
    if archive[:2] != b"\x1f\x8b":
        problems.append("not a gzip file")
    else:
        expanded = _read_members(archive, limit, why, members, problems)
    problems += _link_problems(members)
    if entry_point is not None:
        problems += _entry_point_problems(entry_point, members)
    files = sum(1 for m in members.values() if m.isreg())
    return Inspection(problems, files, len(members), expanded)


def _read_members(archive: bytes, limit: int, why: str, members: dict[str, tarfile.TarInfo],
                  problems: list[str]) -> int:
    """Reads the members' headers into ``members``, their problems into ``problems``; the
    bytes it expanded."""
    stream, declared = _Expanded(archive, limit), 0
    try:
        with tarfile.open(fileobj=io.BufferedReader(stream), mode="r|") as tar:
            for member in tar:
                declared += tarfile.BLOCKSIZE + _blocks(member.size)
                if declared > limit:  # before its data is expanded
                    problems.append(f"its members declare over {limit} bytes: over {why}")
                    break
                if len(members) == MAX_FILES:
                    problems.append(f"over the limit of {MAX_FILES} files and folders")
                    break
                problems += _member_problems(member, members)
                members.setdefault(_name(member.name), member)
    except _TooLarge:
        problems.append(f"expands to over {limit} bytes: over {why}")
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        problems.append(f"not a readable gzip tar: {error}")
    return stream.count


def check(archive: bytes, expected_sha256: str | None = None,
          entry_point: str | None = None) -> list[str]:
    """Every problem of the package at once; empty when it is safe to extract."""
    return inspect(archive, expected_sha256, entry_point).problems


def _member_problems(member: tarfile.TarInfo, seen: dict[str, tarfile.TarInfo]) -> list[str]:
    name, problems = _name(member.name), []
    if member.name.startswith("/"):
        problems.append(f"{member.name!r}: an absolute path")
    elif ".." in name.split("/"):
        problems.append(f"{member.name!r}: leads outside the package (..)")
    if len(name) > MAX_PATH_LENGTH:
        problems.append(f"{name[:80]!r}…: its path is over {MAX_PATH_LENGTH} characters")
    if name in seen:
        problems.append(f"{name!r}: in the package twice")
    if member.type in _KINDS:
        problems.append(f"{name!r}: {_KINDS[member.type]}, which a package may not hold")
    elif not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        problems.append(f"{name!r}: of tar type {member.type!r}, not a file, folder or link")
    elif member.islnk():
        target = _name(member.linkname)
        if member.linkname.startswith("/") or ".." in target.split("/"):
            problems.append(f"{name!r}: a hard link to {member.linkname!r}, outside the package")
        elif target not in seen or not seen[target].isreg():
            problems.append(f"{name!r}: a hard link to {member.linkname!r}, not a file before it "
                            "in the package")
    return problems


def _link_problems(members: dict[str, tarfile.TarInfo]) -> list[str]:
    """Symbolic links that lead outside the package or through another link, and members
    that lie under a link (written through it, they could land anywhere)."""
    links = {name for name, member in members.items() if member.issym()}
    problems = []
    for name, member in members.items():
        if member.issym():
            why = _inside(posixpath.dirname(name), member.linkname, links)
            if why:
                problems.append(f"{name!r}: a link to {member.linkname!r}, {why}")
        parents = name.split("/")[:-1]
        under = next((p for i in range(1, len(parents) + 1)
                      if (p := "/".join(parents[:i])) in links), None)
        if under:
            problems.append(f"{name!r}: lies under the link {under!r}")
    return problems


def _entry_point_problems(entry_point: str, members: dict[str, tarfile.TarInfo]) -> list[str]:
    name = _name(entry_point)
    if entry_point.startswith("/") or ".." in name.split("/") or not name:
        return [f"the entry point {entry_point!r} is outside the package: name a file in it, "
                "relative to its top folder"]
    member = members.get(name)
    if member is None or not member.isreg():
        return [f"the entry point {entry_point!r} is "
                f"{'not in the package' if member is None else 'not a regular file'}"]
    return []


def extract(archive: bytes, dest: str | os.PathLike[str], expected_sha256: str | None = None,
            entry_point: str | None = None) -> Inspection:
    """Unpack a package into ``dest`` (made if missing; it must be empty) once it passes every
    check; tarfile's ``data`` filter refuses, again, anything that would land outside ``dest``
    or that a data archive should not hold. PackageError names every problem."""
    inspection = inspect(archive, expected_sha256, entry_point)
    folder = Path(dest)
    problems = list(inspection.problems)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        problems.append(f"{str(folder)!r} is not an empty folder to unpack into")
    if problems:
        raise PackageError(problems)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        stream = _Expanded(archive, _expansion_limit(len(archive))[0])
        with tarfile.open(fileobj=io.BufferedReader(stream), mode="r|") as tar:
            tar.extractall(folder, filter="data")
    except (_TooLarge, tarfile.TarError, OSError) as error:
        raise PackageError([f"could not be unpacked: {error!r}"]) from None
    return inspection
