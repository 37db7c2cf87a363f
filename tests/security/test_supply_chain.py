"""What the images are built from is fixed: every pip install in a Dockerfile checks each file
against a pinned hash (--require-hashes, from a requirements file in the build context whose
every line is pinned and hashed), and a base image from another registry is named by digest.
A tag someone re-pushes, a package version someone replaces on the index, or a dependency
pulled in unpinned, fails the build instead of landing in it."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((ROOT / "containers").glob("*/Dockerfile"))
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(instruction, arguments) with continuation lines joined and comments dropped."""
    joined, current = [], ""
    for line in dockerfile.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            joined.append(current.strip())
            current = ""
    return [(i.split(" ", 1)[0].upper(), i.split(" ", 1)[1] if " " in i else "")
            for i in joined]


def requirement_lines(path: Path) -> list[list[str]]:
    """Each requirement with its options, continuation lines joined."""
    found, current = [], ""
    for line in path.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip("\\") + " "
        if not line.rstrip().endswith("\\"):
            found.append(current.split())
            current = ""
    return found


def pip_installs(dockerfile: Path) -> list[tuple[list[str], dict[str, Path]]]:
    """Every pip install command, with the build-context files COPY put in the image so far."""
    copied: dict[str, Path] = {}
    found = []
    for instruction, arguments in instructions(dockerfile):
        if instruction == "COPY":
            *sources, target = shlex.split(arguments)
            for source in sources:
                copied[target] = dockerfile.parent / source
        if instruction == "RUN":
            for words in commands(arguments):
                while words and words[0] in ("python3", "python", "-m"):
                    words = words[1:]
                if words[:2] in (["pip", "install"], ["pip3", "install"]):
                    found.append((words, dict(copied)))
    return found


def commands(script: str) -> list[list[str]]:
    """A shell line's simple commands, split at its control operators (quotes respected)."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    found: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= set(";&|()"):
            found.append([])
        else:
            found[-1].append(token)
    return [c for c in found if c]


def file_problems(path: Path) -> list[str]:
    """What is not pinned and hashed in a requirements file."""
    problems = []
    for spec, *options in requirement_lines(path):
        if not PIN.match(spec):
            problems.append(f"{path.name}: {spec} is not pinned with ==")
        if not options or not all(HASH.match(o) for o in options):
            problems.append(f"{path.name}: {spec} lacks sha256 hashes: {options}")
    return problems


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_pip_install_checks_hashes_from_a_pinned_requirements_file(dockerfile):
    installs = pip_installs(dockerfile)
    assert installs, f"{dockerfile}: no pip install found (the parser, or the image, changed)"
    problems = []
    for words, copied in installs:
        command = " ".join(words)
        if "--require-hashes" not in words:
            problems.append(f"{command}: no --require-hashes")
        files = [words[i + 1] for i, w in enumerate(words) if w in ("-r", "--requirement")]
        options = [w for w in words[2:] if w.startswith("-")]
        loose = [w for w in words[2:] if not w.startswith("-") and w not in files]
        if loose:
            problems.append(f"{command}: packages named on the command line: {loose}")
        problems += [f"{command}: {option}" for option in options if option in (
            "--index-url", "-i", "--extra-index-url", "--trusted-host", "--find-links", "-f",
            "-e", "--editable")]
        if not files:
            problems.append(f"{command}: no requirements file")
        for name in files:
            if name in copied and copied[name].is_file():
                problems += file_problems(copied[name])
            else:
                problems.append(f"{command}: {name} is not a file COPY brings in")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_each_hashed_file_pins_exactly_what_its_source_names(dockerfile):
    """The .txt is generated from the .in beside it (containers/hash-requirements.py): the
    same packages at the same versions, so that editing one and not the other shows."""
    for _, copied in pip_installs(dockerfile):
        for hashed in {p for p in copied.values() if p.suffix == ".txt"}:
            source = hashed.with_suffix(".in")
            pinned = [PIN.match(line.strip()).groups() for line in source.read_text().splitlines()
                      if line.strip() and not line.lstrip().startswith("#")]
            generated = [PIN.match(r[0]).groups() for r in requirement_lines(hashed)]
            assert generated == pinned, f"run containers/hash-requirements.py {source}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_from_other_registries_are_named_by_digest_and_none_by_latest(dockerfile):
    arguments = {}
    problems = []
    for instruction, rest in instructions(dockerfile):
        if instruction == "ARG" and "=" in rest:
            name, default = rest.split("=", 1)
            arguments[name] = default
        if instruction == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: arguments.get(m.group(1), ""),
                           rest.split()[0])
            if image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]:
                problems.append(f"FROM {image}: a moving tag")
            first = image.split("/", 1)[0]
            from_registry = "/" in image and ("." in first or ":" in first)
            if from_registry and not DIGEST.search(image):
                problems.append(f"FROM {image}: another registry's image without a digest")
    assert not problems, f"{dockerfile}: " + "; ".join(problems)


def test_the_parser_sees_an_unhashed_install(tmp_path):
    """The checks above would see the install lines they were written against."""
    (tmp_path / "requirements.txt").write_text("pillow==13.0.0\n")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM nvcr.io/nvidia/pytorch:25.01-py3\nCOPY requirements.txt /r.txt\n"
                          "RUN apt-get update \\\n && pip install --no-cache-dir -r /r.txt\n"
                          "RUN python3 -m pip install sagemaker-training==5.1.4\n")
    (words, copied), (loose, _) = pip_installs(dockerfile)
    assert "--require-hashes" not in words and copied == {"/r.txt": tmp_path / "requirements.txt"}
    assert loose[2:] == ["sagemaker-training==5.1.4"]
    with pytest.raises(AssertionError, match="without a digest"):
        test_base_images_from_other_registries_are_named_by_digest_and_none_by_latest(dockerfile)
    with pytest.raises(AssertionError, match="no --require-hashes"):
        test_every_pip_install_checks_hashes_from_a_pinned_requirements_file(dockerfile)


def test_the_audit_covers_every_pinned_environment_and_reads_each_file():
    """make audit's runs (printed by make -n) name constraints.txt, the trainer's requirements
    and every hashed file an image installs, and pip-audit reads each of them (--dry-run: it
    parses and resolves what it would audit, asking no vulnerability service)."""
    printed = subprocess.run(["make", "--no-print-directory", "-n", "audit"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    runs = [shlex.split(line) for line in printed.replace("\\\n", " ").splitlines()
            if "pip-audit" in line]
    audited = {words[i + 1] for words in runs for i, w in enumerate(words) if w == "-r"}
    images = {str(path.relative_to(ROOT)) for dockerfile in DOCKERFILES
              for _, copied in pip_installs(dockerfile) for path in copied.values()
              if path.suffix == ".txt"}
    assert audited == {"constraints.txt", "containers/mnp/requirements-cpu.txt"} | images
    for words in runs:
        result = subprocess.run([*words, "--dry-run"], cwd=ROOT, capture_output=True,
                                text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        assert "would have audited" in result.stderr, result.stderr
