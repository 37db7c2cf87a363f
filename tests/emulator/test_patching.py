"""The emulator's changes to moto: checked against the pinned moto, and undone when it closes."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

import moto
import pytest
from moto.batch.models import Job
from moto.ec2.models.instance_types import INSTANCE_TYPES

import traingrid.clock
from traingrid.aws import clients
from traingrid_local.emulator import batch, fault_injection, sagemaker, sfn_events
from traingrid_local.emulator.lambda_inprocess import FunctionOutput
from traingrid_local.emulator.patching import PINNED_MOTO_VERSION, PatchError, Patches
from traingrid_local.emulator.session import RECORD_CALLS, Emulator

ROOT = Path(__file__).resolve().parents[2]
ABSENT = object()


# Not the modules' own values, so that each shows it was changed.
TRAINING = {"batch": 1234.0, "sagemaker": 567.0}


def targets() -> list[tuple[Any, Any]]:
    """(owner, attribute) of every attribute an emulator changes; (table, keys) for tables."""
    with Emulator(training_seconds=TRAINING) as emulator:
        from traingrid_local.emulator.patching import PATCHES

        assert emulator.speed > 0
        # The warnings filters are one list, changed in place: process_wide() compares them.
        return [(change.target, change.name) for change in PATCHES.applied
                if change.target is not warnings]


def process_wide() -> dict[str, Any]:
    """What an emulator changes beyond moto: the shared clock, stdout, the emulator's
    training times and flags."""
    return {"now": traingrid.clock.now, "stdout": sys.stdout, "faults": fault_injection.CURRENT,
            "batch": batch.TRAINING_SECONDS, "sagemaker": sagemaker.TRAINING_SECONDS,
            "frozen": batch.FROZEN, "dropped": batch.DROPPED_EVENTS,
            "events": sfn_events.ENABLED, "warnings": list(warnings.filters),
            "environment": dict(os.environ), "recording": recording()}


def recording() -> bool:
    """Whether the project's botocore session notes each call for the function making it."""
    emitter = clients.session()._events._emitter  # botocore keeps handlers by unique id here
    return RECORD_CALLS in emitter._unique_id_handlers


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
    assert all(wanted in changed for wanted in (
        (traingrid.clock, "now"), (sys, "stdout"), (batch, "TRAINING_SECONDS"),
        (sagemaker, "TRAINING_SECONDS"), (batch, "DROPPED_EVENTS"),
        (fault_injection, "CURRENT")))
    pristine, before = snapshot(changed), process_wide()
    environ = os.environ
    for _ in range(2):
        with Emulator(training_seconds=TRAINING):
            adapted = snapshot(changed)
            assert all(a is not p for a, p in zip(adapted, pristine, strict=True)
                       if not isinstance(p, dict))
            assert os.environ is not environ
            assert isinstance(sys.stdout, FunctionOutput)
            assert (batch.TRAINING_SECONDS, sagemaker.TRAINING_SECONDS) == (1234.0, 567.0)
            assert batch.DROPPED_EVENTS is not before["dropped"]
            assert len(warnings.filters) > len(before["warnings"])
            assert os.environ["MOTO_ACCOUNT_ID"] == "123456789012"
            assert recording()
        after = snapshot(changed)
        assert all(a is p or a == p for a, p in zip(after, pristine, strict=True))
        assert os.environ is environ
        # What the session set as it closed (jobs frozen, events silenced) is undone too.
        assert all(process_wide()[name] == value for name, value in before.items())
        assert all(process_wide()[name] is value for name, value in before.items()
                   if name not in ("warnings", "environment"))
        assert not batch.FROZEN and sfn_events.ENABLED
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


def test_a_process_wide_value_replaced_meanwhile_stays_its_owners():
    """stdout, say: undo puts back what was there only while ours is still in place."""
    patches = Patches()

    class Process:
        stdout = io.StringIO()

    original, theirs = Process.stdout, io.StringIO()
    ours = patches.swap(Process, "stdout", io.StringIO())
    patches.undo_all()
    assert Process.stdout is original
    patches.swap(Process, "stdout", ours)
    Process.stdout = theirs
    patches.undo_all()
    assert Process.stdout is theirs and patches.applied == []


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


def test_translating_the_template_leaves_the_translators_log_levels_as_they_were():
    from traingrid_local.emulator.deploy import package, translate
    from traingrid_local.templates import load_template

    loggers = [logging.getLogger(name) for name in
               ("samtranslator.feature_toggle", "samtranslator.metrics.metrics")]
    before = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.INFO)
        translated = translate(package(load_template(), upload=lambda key, body: None))
        assert "AWS::Serverless::Function" not in json.dumps(translated)
        assert [logger.level for logger in loggers] == [logging.INFO] * len(loggers)
    finally:
        for logger, level in zip(loggers, before, strict=True):
            logger.setLevel(level)
