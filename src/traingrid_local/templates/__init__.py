"""The stack's templates read as one: ``template.yaml`` and the nested templates it names.

The root template (``template.yaml``) nests one template a concern (``stacks/``: network,
Batch, database, each pipeline, the API, operations). CloudFormation deploys each as a stack of
its own and hands values between them as the nested stacks' parameters and outputs
(:mod:`traingrid_local.emulator.deploy` deploys them so). Whoever *reads* the stack (the
template tests, the IAM check, the doctor, the workflow map, the served API's routes) wants it
whole: :func:`load_template` inlines every nested template into its parent, each of its
parameters replaced by what the parent passes, which for a sibling's output is that output's
own value. The result is the template CloudFormation resolves, one ``Resources`` map over every
nested stack; a logical id is unique across them all, which this enforces.

A nested stack's output for a resource made only under a condition reads
``!If [Cond, <the resource>, ""]`` and its consumer uses it under the same condition: the
inlined ``!If [Cond, !If [Cond, a, b], c]`` is ``!If [Cond, a, c]`` (:func:`_simplified`).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from samtranslator.yaml_helper import intrinsics_multi_constructor

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = PROJECT_ROOT / "template.yaml"
REGIONAL_TEMPLATE = PROJECT_ROOT / "regional" / "template.yaml"
# The resource types that nest a template, and the property naming it.
NESTED = {"AWS::Serverless::Application": "Location", "AWS::CloudFormation::Stack": "TemplateURL"}
# Local-folder properties `sam package` uploads, per resource type: a path relative to the
# template that declares it.
PACKAGED = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
    "AWS::Serverless::StateMachine": "DefinitionUri",
}
_SUB_NAME = re.compile(r"\$\{([A-Za-z0-9:]+)((?:\.[A-Za-z0-9]+)*)\}")


class TemplateError(ValueError):
    """The templates do not nest into one (a clash, a missing output or template)."""


class _TemplateLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML with CloudFormation's short forms (``!Ref``…), as ``sam`` reads it; libyaml's
    parser where installed (a template parses ten times faster)."""


_TemplateLoader.add_multi_constructor("!", intrinsics_multi_constructor)


def parse_template(text: str) -> dict[str, Any]:
    """A template's text (JSON or YAML, CloudFormation's short forms expanded)."""
    parsed = yaml.load(text, Loader=_TemplateLoader)  # noqa: S506 - a safe loader
    if not isinstance(parsed, dict):
        raise TemplateError("the template is not a YAML or JSON mapping")
    return parsed


def read_template(path: Path) -> dict[str, Any]:
    """One template file as written."""
    return parse_template(path.read_text())


def nested_templates(template: dict[str, Any], folder: Path) -> dict[str, Path]:
    """Logical id → the local template file of every nested stack ``template`` declares (a
    ``Location``/``TemplateURL`` that is a path, not an S3 address or an application id)."""
    found = {}
    for logical_id, resource in template.get("Resources", {}).items():
        prop = NESTED.get(resource.get("Type", ""))
        location = resource.get("Properties", {}).get(prop) if prop else None
        if isinstance(location, str) and not location.startswith(("https://", "s3://")):
            found[logical_id] = (folder / location).resolve()
    return found


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template at ``path`` with every nested template inlined (see the module's doc); a
    template that nests none is returned as written."""
    template = read_template(path)
    files = nested_templates(template, path.parent)

    def child(logical_id: str) -> dict[str, Any]:
        file = files[logical_id]
        if not file.is_file():
            raise TemplateError(f"{logical_id}: no template at {file}")
        nested = load_template(file)
        _relative_to(nested.get("Resources", {}), file.parent, path.parent)
        return nested

    return flatten(template, list(files), child)


def flatten(template: dict[str, Any], nested: list[str],
            child: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """``template`` with each nested stack of ``nested`` (logical ids) inlined: ``child(id)``
    is its template, itself flattened already (a file, or a deployed stack's)."""
    return _Inliner(template, nested, child).flattened()


def template_files(path: Path = TEMPLATE) -> list[Path]:
    """``path`` and every template nested under it, parents first."""
    files = [path]
    for child in nested_templates(read_template(path), path.parent).values():
        files += template_files(child)
    return files


def declared_in(path: Path = TEMPLATE) -> dict[str, Path]:
    """Logical id → the template file that declares it, for every resource under ``path``."""
    found = {}
    for file in template_files(path):
        for logical_id, resource in read_template(file).get("Resources", {}).items():
            if resource.get("Type") not in NESTED:
                found[logical_id] = file
    return found


class _Inliner:
    def __init__(self, template: dict[str, Any], nested: list[str],
                 child: Callable[[str], dict[str, Any]]):
        self.template = template
        self.nested = nested
        self.child = child
        self._inlined: dict[str, dict[str, Any]] = {}

    def flattened(self) -> dict[str, Any]:
        if not self.nested:
            return self.template
        flat = {k: v for k, v in self.template.items() if k not in ("Resources", "Outputs")}
        flat["Resources"] = {k: v for k, v in self.template["Resources"].items()
                             if k not in self.nested}
        for logical_id in self.nested:
            for section in ("Resources", "Conditions", "Rules", "Globals"):
                for name, value in self._child(logical_id).get(section, {}).items():
                    mine = flat.setdefault(section, {})
                    if name in mine and (section == "Resources" or mine[name] != value):
                        raise TemplateError(f"{section}.{name} of {logical_id} clashes with "
                                            f"another template's {name}")
                    mine[name] = value
        if "Outputs" in self.template:
            flat["Outputs"] = self._in_root(self.template["Outputs"])
        return flat

    def _child(self, logical_id: str) -> dict[str, Any]:
        """The nested template ``logical_id``, its parameters replaced."""
        if logical_id not in self._inlined:
            child = self.child(logical_id)
            declared = child.get("Parameters", {})
            passed = self.template["Resources"][logical_id].get("Properties", {}).get(
                "Parameters", {})
            values = {}
            for name, value in passed.items():
                if name not in declared:
                    raise TemplateError(f"{logical_id} passes {name}, which its template "
                                        "does not declare")
                value = self._in_root(value)
                if _is_list(declared[name]) and _joined(value) is not None:
                    value = _joined(value)  # a list passed as CloudFormation wants, joined
                values[name] = value
            missing = [p for p, d in declared.items() if p not in values and "Default" not in d]
            if missing:
                raise TemplateError(f"{logical_id} does not pass {', '.join(missing)}")
            body = {k: v for k, v in child.items() if k != "Parameters"}
            self._inlined[logical_id] = _substituted(body, values)
        return self._inlined[logical_id]

    def _in_root(self, node: Any) -> Any:
        """``node`` of the root with each ``!GetAtt <Nested>.Outputs.<Name>`` replaced by that
        output's value."""
        if isinstance(node, list):
            return [self._in_root(item) for item in node]
        if not isinstance(node, dict):
            return node
        attribute = node.get("Fn::GetAtt")
        if len(node) == 1 and attribute is not None:
            target, _, name = (attribute if isinstance(attribute, str)
                               else ".".join(attribute)).partition(".Outputs.")
            if target in self.nested and name:
                outputs = self._child(target).get("Outputs", {})
                if name not in outputs:
                    raise TemplateError(f"{target} has no output {name}")
                return copy.deepcopy(outputs[name]["Value"])
        return {key: self._in_root(value) for key, value in node.items()}


def _relative_to(resources: dict[str, Any], declared_in: Path, root: Path) -> None:
    """Make each local code path, relative to the nested template's folder, relative to the
    root's (as ``sam build`` resolves it)."""
    for resource in resources.values():
        prop = PACKAGED.get(resource.get("Type", ""))
        local = resource.get("Properties", {}).get(prop) if prop else None
        if isinstance(local, str) and "://" not in local:
            path = os.path.relpath((declared_in / local).resolve(), root.resolve())
            resource["Properties"][prop] = path + ("/" if local.endswith("/") else "")


def _is_list(declared: dict[str, Any]) -> bool:
    kind = str(declared.get("Type", ""))
    return kind.startswith("List<") or kind == "CommaDelimitedList"


def _joined(value: Any) -> Any:
    """X of ``!Join [",", X]``, else None."""
    if isinstance(value, dict) and list(value) == ["Fn::Join"] and value["Fn::Join"][0] == ",":
        return value["Fn::Join"][1]
    return None


def _substituted(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_substituted(item, values) for item in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1 and "Ref" in node and node["Ref"] in values:
        return copy.deepcopy(values[node["Ref"]])
    if len(node) == 1 and "Fn::Sub" in node:
        return {"Fn::Sub": _sub(node["Fn::Sub"], values)}
    done = {key: _substituted(value, values) for key, value in node.items()}
    return _simplified(done) if "Fn::If" in done and len(done) == 1 else done


def _sub(sub: Any, values: dict[str, Any]) -> Any:
    """A ``Fn::Sub`` with the parameters in its string replaced: a reference stays a reference
    (``${Name}``, ``${Name.Attr}``); anything else becomes one of its variables."""
    text, variables = (sub, {}) if isinstance(sub, str) else (sub[0], dict(sub[1]))
    variables = {k: _substituted(v, values) for k, v in variables.items()}
    extra: dict[str, Any] = {}

    def replace(match: re.Match[str]) -> str:
        name, attribute = match.group(1), match.group(2)
        if name in variables or name not in values or attribute:
            return match.group(0)
        value = values[name]
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and list(value) == ["Ref"]:
            return "${" + value["Ref"] + "}"
        if isinstance(value, dict) and list(value) == ["Fn::GetAtt"]:
            target = value["Fn::GetAtt"]
            return "${" + (target if isinstance(target, str) else ".".join(target)) + "}"
        extra[name] = value
        return match.group(0)

    text = _SUB_NAME.sub(replace, text)
    variables |= extra
    return [text, variables] if variables else text


def _simplified(node: dict[str, Any]) -> dict[str, Any]:
    """``!If [c, !If [c, a, _], !If [c, _, b]]`` is ``!If [c, a, b]``."""
    condition, when_true, when_false = node["Fn::If"]

    def branch(value: Any, index: int) -> Any:
        inner = value.get("Fn::If") if isinstance(value, dict) and len(value) == 1 else None
        if isinstance(inner, list) and inner[0] == condition:
            return inner[index]
        return value

    return {"Fn::If": [condition, branch(when_true, 1), branch(when_false, 2)]}
