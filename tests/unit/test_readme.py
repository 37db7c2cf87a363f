"""The README is a door: short, with a map that matches the tree; the depth is in docs/, and
every link between them resolves."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_LINES = 200
# Every top-level package of these is on the map.
PACKAGE_ROOTS = ("layers/traingrid/python/traingrid", "src/traingrid_local")
# Pages linked before they land: the EKS backend's page comes with the backend.
PENDING = {"docs/eks.md"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE = re.compile(r"`([\w/]+\.py)`")
SOURCE_ROOTS = ("layers", "src", "containers", "functions", "tests", "examples")


def map_lines() -> list[str]:
    """The lines of the code block under the README's `## Map`."""
    text = README.read_text()
    section = text.split("\n## Map\n", 1)[1]
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines()[1:] if line.strip()]


def map_paths() -> list[str]:
    """Each entry's path: a line's first word; an indented one is under the entry above it."""
    paths: list[str] = []
    parent = ""
    for line in map_lines():
        path = line.split()[0]
        if line.startswith("  "):
            paths.append(parent + path)
        else:
            parent = path
            paths.append(path)
    return paths


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) < MAX_LINES, f"README.md has {len(lines)} lines: move depth to docs/"


def test_the_map_fits_one_screen_and_each_entry_one_line():
    lines = map_lines()
    assert len(lines) <= 60
    for line in lines:
        assert len(line) <= 100, line
        assert re.match(r" {0,2}\S+ {2,}\S", line) or line.rstrip().endswith("/"), (
            f"not `path  description`: {line!r}")


def test_every_path_the_map_names_exists():
    for path in map_paths():
        pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
        matches = [m for m in ROOT.glob(pattern) if m.is_dir() == path.endswith("/")
                   or "*" in pattern]
        assert matches, f"the README's map names {path}, which is not in the tree"


@pytest.mark.parametrize("root", PACKAGE_ROOTS)
def test_the_map_names_every_top_level_package(root):
    packages = sorted(d.name for d in (ROOT / root).iterdir()
                      if d.is_dir() and (d / "__init__.py").exists())
    assert packages
    named = set(map_paths())
    missing = [p for p in packages if f"{root}/{p}/" not in named]
    assert not missing, f"the README's map leaves out {root}/: {missing}"


def test_the_map_names_every_top_level_folder():
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True, timeout=60).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: which folders are the project's is unknown")
    folders = {path.split("/")[0] for path in tracked if "/" in path}
    paths = map_paths()
    missing = sorted(f for f in folders if not any(p.startswith(f"{f}/") for p in paths))
    assert not missing, f"the README's map leaves out {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text().splitlines()
            if line.startswith("#")}


PAGES = [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        relative = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else ""
        if relative in PENDING and not resolved.exists():
            continue
        assert resolved.exists(), f"{page.name} links {target}: no such file"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name} links {target}: no such heading"


def test_the_readme_links_every_docs_page():
    linked = set(LINK.findall(README.read_text()))
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")} | PENDING
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"


def test_the_module_index_names_only_modules_that_exist():
    files = {p.relative_to(ROOT).as_posix() for base in SOURCE_ROOTS
             for p in (ROOT / base).rglob("*.py")}
    text = (DOCS / "layout.md").read_text()
    for module in MODULE.findall(text):
        assert any(f == module or f.endswith(f"/{module}") for f in files), (
            f"docs/layout.md names {module}, which is not in the tree")
