"""Is a run's archive complete? The job's output index, held against what S3 holds.

The training job's main node indexes its outputs (``outputs.json``: every file's path and
size) and exports them to S3 before it ends. When S3 holds every indexed file at its size, the
archive is complete and the file system can go at once; otherwise an export task copies the
rest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from traingrid.training.output_index import OutputIndex

OUTPUT_INDEX = "outputs.json"


def outputs_of(archive: Mapping[str, Any]) -> str:
    """Where a plan's job outputs are in S3 (a plan made before outputs had a folder of their
    own kept them at the run's prefix)."""
    return str(archive.get("outputs_prefix") or archive["prefix"])


def file_system_path(archive: Mapping[str, Any], key: str) -> str:
    """The file system's path (from its root) of an output's S3 key."""
    return f"{archive['file_system_path']}/{key.removeprefix(outputs_of(archive))}"


def parse_index(document: Any) -> OutputIndex | None:
    """The index, or None when it is not one (then nothing can be verified against it)."""
    try:
        return OutputIndex.model_validate(document)
    except ValidationError:
        return None


def missing_outputs(index: OutputIndex, objects: list[dict[str, Any]], prefix: str) -> list[str]:
    """Indexed paths that S3 does not hold under ``prefix`` at their indexed size."""
    sizes = {o["key"].removeprefix(prefix): o["size"] for o in objects}
    return [f.path for f in index.files if sizes.get(f.path) != f.size]
