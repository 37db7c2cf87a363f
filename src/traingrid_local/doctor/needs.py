"""What a TrainGrid stack needs of its account, read from where its configuration lives.

Before the first deploy: ``template.yaml``'s defaults, then ``samconfig.toml``'s
``parameter_overrides``, then the command's flags. For a deployed stack: its own template and
parameters, then the flags. Parameters are read by name, and an image's repository and tag
from the job definition's ``Image`` as written, so a template that names the node image by
``TrainingImageUri``, by a repository it creates itself or by a version-tag parameter reads
the same way.
"""

from __future__ import annotations

import copy
import functools
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from traingrid.vocabulary.catalog import INSTANCE_TYPES, InstanceType
from traingrid_local.templates import TemplateError, load_template, template_files

ECR_URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com"
                     r"(?:\.cn)?/(?P<repository>[a-z0-9._/-]+?)(?::(?P<tag>[\w.-]+))?"
                     r"(?:@(?P<digest>sha256:[0-9a-f]+))?$")
SUB_VARIABLE = re.compile(r"\$\{([A-Za-z0-9:._]+)\}")


def read_template(path: Path) -> dict[str, Any]:
    """The stack's template at ``path``, read through the templates it nests (parsed once
    while none of them changes)."""
    try:
        files = template_files(path)
        stamps = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
        return copy.deepcopy(_read(str(path), stamps))
    except (OSError, yaml.YAMLError, TemplateError) as error:
        raise ConfigurationError(f"cannot read {path}: {error}") from None


@functools.lru_cache(maxsize=4)
def _read(path: str, _stamps: tuple[tuple[str, int, int], ...]) -> dict[str, Any]:
    return load_template(Path(path))


class ConfigurationError(ValueError):
    """The configuration cannot be read (every problem in the message)."""


@dataclass(frozen=True)
class Image:
    """An image a stack runs: ``repository:tag`` in ECR of ``region``; ``uri`` when it is not
    in ECR (nothing to check there)."""

    repository: str | None
    tag: str
    region: str
    uri: str = ""
    created_by_deploy: bool = False  # the stack's own repository, not there before its deploy

    @property
    def name(self) -> str:
        return f"{self.repository}:{self.tag}" if self.repository else self.uri


@dataclass
class Needs:
    region: str
    stack: str | None
    template: dict[str, Any]
    parameters: dict[str, str]
    nodes: int
    campaign_regions: list[str]
    campaign_instance_type: str
    campaign_instance_count: int
    # Deployed stacks: logical id → (type, physical id).
    resources: dict[str, tuple[str, str]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def resources_of(self, type_: str) -> dict[str, dict[str, Any]]:
        return {logical: r for logical, r in self.template.get("Resources", {}).items()
                if r.get("Type") == type_}

    @property
    def instance_types(self) -> list[str]:
        return [t.strip() for t in self.parameters.get("TrainingInstanceTypes", "").split(",")
                if t.strip()]

    @property
    def known_instance_types(self) -> list[InstanceType]:
        return [INSTANCE_TYPES[t] for t in self.instance_types if t in INSTANCE_TYPES]

    @property
    def max_vcpus(self) -> int | None:
        value = self.parameters.get("MaxVcpus", "")
        return int(value) if value.isdigit() else None

    @property
    def managed_spot(self) -> bool:
        return self.parameters.get("ManagedSpot", "false").lower() == "true"

    @property
    def compute_spot(self) -> bool:
        """The Batch compute environment launches spot instances (ComputeResources.Type)."""
        return any(str(r.get("Properties", {}).get("ComputeResources", {}).get("Type", ""))
                   .upper() in ("SPOT", "FARGATE_SPOT")
                   for r in self.resources_of("AWS::Batch::ComputeEnvironment").values())

    @property
    def vpc_id(self) -> str:
        return self.parameters.get("VpcId", "")

    @property
    def subnet_ids(self) -> list[str]:
        return [s.strip() for s in self.parameters.get("TrainingSubnetIds", "").split(",")
                if s.strip()]

    @property
    def database_subnet_ids(self) -> list[str]:
        return [s.strip() for s in self.parameters.get("DatabaseSubnetIds", "").split(",")
                if s.strip()]

    @property
    def creates_database(self) -> bool:
        """The stack creates the campaign database (no DatabaseSecretArn brought along)."""
        return not self.parameters.get("DatabaseSecretArn", "")

    @property
    def fsx_storage_quota_gib(self) -> int | None:
        """What the stack's plan sizes file systems within (FsxStorageQuotaGiB)."""
        value = self.parameters.get("FsxStorageQuotaGiB", "")
        return int(value) if value.isdigit() else None

    def reserved_concurrency(self) -> dict[str, int]:
        """Function logical id → the concurrency its template reserves."""
        found = {}
        for type_ in ("AWS::Serverless::Function", "AWS::Lambda::Function"):
            for logical, resource in self.resources_of(type_).items():
                value = self.resolve(resource.get("Properties", {})
                                     .get("ReservedConcurrentExecutions"))
                if value is not None and str(value).isdigit():
                    found[logical] = int(value)
        return found

    def grants_service_linked_role(self, service: str) -> bool:
        """Some role of the stack may call iam:CreateServiceLinkedRole for ``service``."""

        def statements(value: Any) -> Iterator[dict[str, Any]]:
            if isinstance(value, dict):
                if "Action" in value and "Effect" in value:
                    yield value
                for item in value.values():
                    yield from statements(item)
            elif isinstance(value, list):
                for item in value:
                    yield from statements(item)

        for statement in statements(self.template.get("Resources", {})):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [
                statement["Action"]]
            if statement.get("Effect") != "Allow" or not {"iam:CreateServiceLinkedRole",
                                                          "iam:*", "*"} & set(map(str, actions)):
                continue
            resources = list(_strings(statement.get("Resource", [])))
            if any(r == "*" or f"aws-service-role/{service}/" in r for r in resources):
                return True
        return False

    def resolve(self, value: Any) -> Any:
        """A ``Ref`` to a parameter as its value; anything else as written."""
        if isinstance(value, dict) and set(value) == {"Ref"}:
            return self.parameters.get(value["Ref"])
        return value

    def node_image(self) -> Image | None:
        """The multi-node job's image: TrainingImageUri if set, else the job definition's
        image as the template writes it (its repository and tag resolved)."""
        uri = self.parameters.get("TrainingImageUri", "")
        if uri:
            return self._image_of(uri)
        for definition in self.resources_of("AWS::Batch::JobDefinition").values():
            for written in _strings(definition.get("Properties", {})):
                if "dkr.ecr" in written or ".RepositoryUri}" in written:
                    created: list[str] = []
                    return self._image_of(self._substitute(written, created), bool(created))
        return None

    def regional_image(self, region: str) -> Image:
        """The SageMaker image in a campaign region (TrainingImageRepository, repo:tag)."""
        written = self.parameters.get("TrainingImageRepository", "traingrid-sagemaker:latest")
        repository, _, tag = written.partition(":")
        return Image(repository, tag or "latest", region)

    def _image_of(self, uri: str, created_by_deploy: bool = False) -> Image:
        match = ECR_URI.match(uri)
        if match is None:
            return Image(None, "", self.region, uri)
        return Image(match["repository"], match["digest"] or match["tag"] or "latest",
                     match["region"], uri, created_by_deploy)

    def _substitute(self, written: str, created: list[str]) -> str:
        """``Fn::Sub`` as CloudFormation would: parameters, pseudo parameters, an ECR
        repository's URI (its name from the deployed stack, or its RepositoryName; before
        the deploy names one, its logical id, added to ``created``)."""

        def value(match: re.Match[str]) -> str:
            name = match[1]
            if name == "AWS::Region":
                return self.region
            if name == "AWS::AccountId":
                return "000000000000"
            if name in self.parameters:
                return self.parameters[name]
            logical = name.split(".", 1)[0]
            repository = self.resources_of("AWS::ECR::Repository").get(logical)
            if repository is not None:
                deployed = self.resources.get(logical)
                declared = repository.get("Properties", {}).get("RepositoryName")
                if deployed:
                    repo = deployed[1]
                else:
                    created.append(logical)
                    repo = declared if isinstance(declared, str) else logical.lower()
                return f"000000000000.dkr.ecr.{self.region}.amazonaws.com/{repo}"
            return match[0]

        return SUB_VARIABLE.sub(value, written)


def _strings(value: Any) -> Iterator[str]:
    """Every string under ``value`` (an ``Fn::Sub``'s template and the branches of an
    ``Fn::If`` included), in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("Ref", "Fn::GetAtt", "Condition"):
                continue
            yield from _strings(item)


def template_defaults(template: dict[str, Any]) -> dict[str, str]:
    return {name: _as_parameter(spec["Default"])
            for name, spec in template.get("Parameters", {}).items() if "Default" in spec}


def _as_parameter(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def samconfig_overrides(path: Path, environment: str = "default") -> dict[str, str]:
    """``parameter_overrides`` of ``sam deploy`` in samconfig.toml (a string of
    ``Key=Value`` pairs, shell-quoted, or a list of them); {} without one."""
    if not path.exists():
        return {}
    try:
        config = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigurationError(f"cannot read {path}: {error}") from None
    section = config.get(environment, {})
    written = (section.get("deploy", {}).get("parameters", {}).get("parameter_overrides")
               or section.get("global", {}).get("parameters", {}).get("parameter_overrides"))
    if not written:
        return {}
    pairs = written if isinstance(written, list) else shlex.split(written)
    return parse_pairs(pairs, f"{path} parameter_overrides")


def parse_pairs(pairs: list[str], where: str) -> dict[str, str]:
    found, bad = {}, []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            bad.append(pair)
        else:
            found[key.strip()] = value.strip()
    if bad:
        raise ConfigurationError(f"{where}: not Key=Value: {', '.join(map(repr, bad))}")
    return found
