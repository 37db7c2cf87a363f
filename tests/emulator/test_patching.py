"""The emulator's changes to moto: checked against the pinned moto, and undone when it closes."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import moto
import pytest
from moto.batch.models import Job
from moto.ec2.models.instance_types import INSTANCE_TYPES

from traingrid_local.emulator.patching import PINNED_MOTO_VERSION, PatchError, Patches
from traingrid_local.emulator.session import Emulator

ROOT = Path(__file__).resolve().parents[2]
ABSENT = object()


def targets() -> list[tuple[Any, Any]]:
    """(owner, attribute) of every attribute an emulator changes; (table, keys) for tables."""
    with Emulator() as emulator:
        from traingrid_local.emulator.patching import PATCHES

        assert emulator.speed > 0
        return [(change.target, change.name) for change in PATCHES.applied]


def snapshot(changed: list[tuple[Any, Any]]) -> list[Any]:
    """What each target holds: the attribute as stored on its owner (or absent), the entries
    of a table."""
    taken = []
    for target, name in changed:
        if isinstance(name, tuple):
            taken.append({key: target.get(key, ABSENT) for key in name})
        else:
            taken.append(target.__dict__.get(name, ABSENT))
    return taken


def test_two_emulators_in_a_row_leave_moto_as_it_was():
    changed = targets()
    assert len(changed) > 40
    pristine = snapshot(changed)
    environ = os.environ
    for _ in range(2):
        with Emulator():
            adapted = snapshot(changed)
            assert all(a is not p for a, p in zip(adapted, pristine, strict=True)
                       if not isinstance(p, dict))
            assert os.environ is not environ
        after = snapshot(changed)
        assert all(a is p or a == p for a, p in zip(after, pristine, strict=True))
        assert os.environ is environ
    # What the emulator adds is gone, not left behind: Job has no class-level status.
    assert "status" not in Job.__dict__ and "p3.16xlarge" not in INSTANCE_TYPES


def test_a_missing_target_is_named_with_the_versions():
    patches = Patches()

    class Backend:
        def describe(self) -> str:
            return "described"

    with pytest.raises(PatchError, match=r"Backend\.descibe is missing \(moto "
                       + moto.__version__.replace(".", r"\.")):
        patches.wrap(Backend, "descibe", lambda previous: previous)
    with pytest.raises(PatchError, match=r"Backend\.describe exists now"):
        patches.add(Backend, "describe", lambda self: "ours")
    assert patches.applied == []


def test_a_replacement_calls_what_it_replaced_and_undo_restores_it_newest_first():
    patches = Patches()

    class Backend:
        def describe(self) -> str:
            return "described"

    original = Backend.__dict__["describe"]
    patches.wrap(Backend, "describe", lambda previous: lambda self: previous(self) + ", once")
    patches.wrap(Backend, "describe", lambda previous: lambda self: previous(self) + ", twice")
    patches.add(Backend, "extra", 1)
    assert Backend().describe() == "described, once, twice" and Backend.extra == 1
    patches.undo_all()
    assert Backend.__dict__["describe"] is original and not hasattr(Backend, "extra")


def test_another_moto_is_refused_with_what_to_do():
    with pytest.raises(PatchError, match=r"adapts moto 4\.0\.0, but moto .* is installed"):
        Patches(version="4.0.0").check_version()
    Patches().check_version()


def test_the_pinned_moto_is_the_one_the_project_installs():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [p for p in pyproject["project"]["optional-dependencies"]["local"]
            if p.startswith("moto")]
    assert pins and all(p.endswith(f"=={PINNED_MOTO_VERSION}") for p in pins)
    assert moto.__version__ == PINNED_MOTO_VERSION
