"""docs/workflow-map.md: every Task state, its function and the module that decides it."""

from __future__ import annotations

import importlib
import json

from traingrid_local.stack import workflow_map
from traingrid_local.templates import load_template


def test_the_page_is_what_the_asl_the_template_and_the_handlers_say():
    assert workflow_map.PAGE.read_text() == workflow_map.render(), (
        "docs/workflow-map.md is out of date: python -m traingrid_local.stack.workflow_map")


def test_every_task_state_is_mapped_to_a_function_of_the_runtime_package_that_exists():
    template = load_template()
    for machine in workflow_map.machines(template):
        definition = json.loads((workflow_map.ROOT / template["Resources"][machine][
            "Properties"]["DefinitionUri"]).read_text())
        mapped = workflow_map.steps(template, machine)
        assert {s.state for s in mapped} == {name for name, _ in
                                             workflow_map._tasks(definition["States"])}
        for step in mapped:
            if step.function is None:
                assert ":" in step.decides  # a service call Step Functions makes itself
                continue
            module, _, name = step.decides.rpartition(".")
            assert callable(getattr(importlib.import_module(module), name)), step


def test_every_function_serves_one_purpose():
    """A function may serve several states (Plan and MeasureDataset; RecordSuccess and
    RecordFailure), but always through the one function of the runtime package that decides
    them: a handler switching on what its event holds is two functions."""
    template = load_template()
    deciders: dict[str, set[str]] = {}
    for machine in workflow_map.machines(template):
        for step in workflow_map.steps(template, machine):
            if step.function is not None:
                deciders.setdefault(step.function, set()).add(step.decides)
    assert "CheckArchiveFunction" in deciders and "WriteManifestFunction" in deciders
    assert {f: d for f, d in deciders.items() if len(d) > 1} == {}
