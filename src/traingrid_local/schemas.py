"""The JSON Schemas in ``schema/`` are generated from the request models (one home for each
contract). ``python -m traingrid_local.schemas write`` rewrites them; a test keeps them equal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from traingrid.campaigns.fanout_request import FanoutRequest
from traingrid.training.run_request import TrainingRunRequest

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"
SCHEMAS = {"training-run-request.schema.json": TrainingRunRequest,
           "campaign-fanout-request.schema.json": FanoutRequest}


def render(model: Any) -> str:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              **model.model_json_schema()}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if argv[1:] != ["write"]:
        print("usage: python -m traingrid_local.schemas write", file=sys.stderr)
        return 2
    for name, model in SCHEMAS.items():
        (SCHEMA_DIR / name).write_text(render(model))
        print(f"wrote schema/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
