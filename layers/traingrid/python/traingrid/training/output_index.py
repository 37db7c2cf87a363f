"""The job's output index (``outputs.json``) as a model: every file's path and size.

Its own module so that pydantic is loaded only where an index is read (WriteManifest, the
janitor's archive check), not by every step that imports ``archive`` for its paths.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class OutputFile(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path: str = Field(min_length=1)
    size: int = Field(ge=0)


class OutputIndex(BaseModel):
    model_config = ConfigDict(extra="ignore")
    files: list[OutputFile]
