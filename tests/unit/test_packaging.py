"""A wheel of the project holds every module of its packages, and each imports from it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.unit.test_import_graph import PACKAGE_ROOTS as FIRST_PARTY

ROOT = Path(__file__).resolve().parents[2]
# The trainer ships in the node image, with PyTorch, not in the project's wheel.
PACKAGE_ROOTS = {name: root for name, root in FIRST_PARTY.items() if name != "traingrid_trainer"}


def source_modules() -> set[str]:
    return {f"{package}/{path.relative_to(root).as_posix()}"
            for package, root in PACKAGE_ROOTS.items() for path in root.rglob("*.py")}


def copy_project(target: Path) -> Path:
    """What a build reads, so that building leaves nothing in the working tree."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, target / name)
    for root in PACKAGE_ROOTS.values():
        shutil.copytree(root, target / root.relative_to(ROOT),
                        ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_the_wheel_ships_every_module_and_each_imports_from_it(tmp_path):
    source = copy_project(tmp_path / "source")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True, text=True,
    )
    (wheel,) = (tmp_path / "dist").glob("traingrid-*.whl")
    installed = tmp_path / "installed"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(installed)
        shipped = {name for name in archive.namelist() if name.endswith(".py")}
        console = {name for name in archive.namelist() if "/console/static/" in name}
    assert source_modules() - shipped == set(), "modules missing from the wheel"
    assert console == {f"traingrid_local/console/static/{name}"
                       for name in ("index.html", "console.css", "console.js", "metrics.js")}

    modules = sorted(name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                     for name in shipped if not name.endswith("__main__.py"))
    # -S: no site processing, so the editable install of the working tree is not on the path;
    # the wheel comes first, the environment's third-party packages after it.
    probe = (
        "import importlib, json, sys\n"
        f"sys.path[:0] = [{str(installed)!r}, {sysconfig.get_paths()['purelib']!r}]\n"
        "failed = {}\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        module = importlib.import_module(name)\n"
        f"        assert module.__file__.startswith({str(installed)!r}), module.__file__\n"
        "    except Exception as error:\n"
        "        failed[name] = repr(error)\n"
        "print(json.dumps(failed))\n"
    )
    result = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True,
                            text=True, check=True, cwd=tmp_path)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {}
    assert len(modules) > 80
