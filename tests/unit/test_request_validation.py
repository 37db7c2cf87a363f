"""Request validation, property-based: any JSON body is either a request or a 400 whose
problems each point into the body; the models and their JSON Schemas agree."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traingrid.campaigns.fanout_request import FanoutRequest
from traingrid.errors import RequestInvalid
from traingrid.training.run_request import TrainingRunRequest
from traingrid.validation import parse
from traingrid.vocabulary.catalog import INSTANCE_TYPES, DeploymentType
from traingrid_local.schemas import SCHEMA_DIR

SCHEMAS = {
    TrainingRunRequest: json.loads((SCHEMA_DIR / "training-run-request.schema.json").read_text()),
    FanoutRequest: json.loads((SCHEMA_DIR / "campaign-fanout-request.schema.json").read_text()),
}
FIELDS = {model: list(model.model_fields) for model in SCHEMAS}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)


def bodies(model: type) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with the model's own field names (and some others) holding any JSON."""
    keys = st.one_of(st.sampled_from(FIELDS[model]), st.text(min_size=1, max_size=10))
    return st.dictionaries(keys, json_values, max_size=6)


def resolves(pointer: str, body: Any) -> bool:
    """The pointer names a place in the body, or a missing member of an object in it."""
    node = body
    for raw in [p for p in pointer.split("/")[1:]]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if part not in node:
                return True  # a required member that is missing
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), model=st.sampled_from(list(SCHEMAS)))
def test_any_body_is_a_request_or_problems_that_point_into_it(data, model):
    body = data.draw(st.one_of(bodies(model), json_values))
    try:
        request = parse(model, body)
    except RequestInvalid as invalid:
        assert invalid.problems
        for problem in invalid.problems:
            assert problem["message"].strip()
            assert problem["pointer"] == "" or problem["pointer"].startswith("/")
            assert resolves(problem["pointer"], body), (problem, body)
        assert f"{len(invalid.problems)} problem(s)" in invalid.message
    else:
        assert isinstance(body, dict)
        jsonschema.validate(body, SCHEMAS[model])  # what the model takes, the schema takes
        dumped = request.model_dump(mode="json", exclude_none=True)
        assert parse(model, dumped) == request


@settings(max_examples=200, deadline=None)
@given(body=bodies(TrainingRunRequest))
def test_what_the_schema_refuses_the_model_refuses_too(body):
    if not jsonschema.Draft202012Validator(SCHEMAS[TrainingRunRequest]).is_valid(body):
        try:
            parse(TrainingRunRequest, body)
        except RequestInvalid:
            return
        raise AssertionError(f"the model took what its schema refuses: {body}")


valid_runs = st.fixed_dictionaries(
    # A prefix below the bucket's root, outside the runs' archives (runs/), no empty segment.
    {"dataset": st.from_regex(r"s3://traingrid-demo-data/([a-z0-9]{1,8}/){0,4}[a-z0-9]{1,30}/?",
                              fullmatch=True).filter(
        lambda uri: not re.match(r"s3://traingrid-demo-data/runs(/|$)", uri))},
    optional={
        "nodes": st.integers(1, 500),
        "instance_type": st.sampled_from(sorted(INSTANCE_TYPES)),
        "batch_size": st.integers(1, 65_536),
        "epochs": st.integers(11, 10_000),
        "warmup_epochs": st.integers(0, 10),
        "lr_decay_mode": st.sampled_from(["poly", "cosine", "step", "linear"]),
        "name": st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,79}", fullmatch=True),
        "fsx": st.fixed_dictionaries({}, optional={
            "deployment_type": st.sampled_from([d.value for d in DeploymentType])}),
    })


@settings(max_examples=200, deadline=None)
@given(body=valid_runs)
def test_every_valid_run_request_is_accepted_by_the_model_and_the_schema(body):
    request = parse(TrainingRunRequest, body)
    assert request.dataset.endswith("/")
    jsonschema.validate(body, SCHEMAS[TrainingRunRequest])


@settings(max_examples=200, deadline=None)
@given(body=valid_runs, extra=st.text(min_size=1, max_size=12), nodes=st.integers(max_value=0))
def test_every_problem_is_listed_at_once(body, extra, nodes):
    if extra in TrainingRunRequest.model_fields:
        return
    body = body | {extra: 1, "nodes": nodes}
    try:
        parse(TrainingRunRequest, body)
    except RequestInvalid as invalid:
        pointers = {p["pointer"] for p in invalid.problems}
        escaped = extra.replace("~", "~0").replace("/", "~1")
        assert {"/nodes", f"/{escaped}"} <= pointers
    else:
        raise AssertionError("accepted an unknown field and nodes < 1")




def test_an_unknown_field_is_named_with_the_closest_field_of_its_own_model():
    body = {"dataset": "s3://bucket/data/", "nodse": 2, "fsx": {"preloda": True}, "zzzz": 1}
    try:
        parse(TrainingRunRequest, body)
    except RequestInvalid as invalid:
        problems = {p["pointer"]: p["message"] for p in invalid.problems}
    else:
        raise AssertionError("accepted unknown fields")
    assert problems == {"/nodse": "unknown field; did you mean 'nodes'?",
                        "/fsx/preloda": "unknown field; did you mean 'preload'?",
                        "/zzzz": "unknown field"}
