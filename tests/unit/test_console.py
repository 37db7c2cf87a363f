"""The console's graph drawing and its pages, without a browser (tests/console has one)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import pytest

from traingrid_local.console.app import Console
from traingrid_local.console.graph import END, START, layout, svg, transitions

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = {name: json.loads((ROOT / "statemachines" / f"{file}.asl.json").read_text())
               for name, file in (("TrainingRun", "training_run"),
                                  ("CampaignFanout", "campaign_fanout"))}
SVG = "{http://www.w3.org/2000/svg}"


def all_states(graph: dict) -> dict[str, dict]:
    found = {}
    for name, state in graph["States"].items():
        found[name] = state
        for inner in ([state["ItemProcessor"]] if state["Type"] == "Map" else []):
            found |= all_states(inner)
    return found


@pytest.mark.parametrize("pipeline", DEFINITIONS)
def test_every_state_is_drawn_once_and_the_maps_states_inside_the_map(pipeline):
    drawing = ET.fromstring(svg(DEFINITIONS[pipeline], pipeline))
    drawn = [g.get("data-state") for g in drawing.iter(f"{SVG}g") if g.get("data-state")]
    assert sorted(drawn) == sorted(all_states(DEFINITIONS[pipeline]))
    if pipeline == "CampaignFanout":
        fan_out = next(g for g in drawing.iter(f"{SVG}g") if g.get("data-state") == "FanOut")
        inside = {g.get("data-state") for g in fan_out.iter(f"{SVG}g")} - {None, "FanOut"}
        assert inside == set(DEFINITIONS[pipeline]["States"]["FanOut"]["ItemProcessor"]
                             ["States"])


def overlap(a, b) -> bool:
    return (abs(a.x - b.x) < (a.width + b.width) / 2
            and a.y < b.y + b.height and b.y < a.y + a.height)


@pytest.mark.parametrize("pipeline", DEFINITIONS)
def test_no_two_states_overlap_and_every_transition_joins_its_two_states(pipeline):
    drawn = layout(DEFINITIONS[pipeline])
    for a, b in combinations(drawn.nodes.values(), 2):
        assert not overlap(a, b), (a.id, b.id)
    expected = {(START, DEFINITIONS[pipeline]["StartAt"])} | {
        (name, target) for name, state in DEFINITIONS[pipeline]["States"].items()
        for target, _ in transitions(state)}
    assert {(e.source, e.target) for e in drawn.edges} == expected
    for edge in drawn.edges:
        source, target = drawn.nodes[edge.source], drawn.nodes[edge.target]
        (x0, y0), (x1, y1) = edge.points[0], edge.points[-1]
        if edge.source == edge.target:
            continue
        going_down = target.layer > source.layer
        # Down the page from the source's bottom to the target's top; a loop back up from
        # the source's top to the target's bottom.
        assert (x0, y0) == (source.x, source.y + (source.height if going_down else 0))
        assert (x1, y1) == (target.x, target.y + (0 if going_down else target.height))


def test_a_poll_loop_runs_down_then_back_up_to_the_state_it_repeats():
    drawn = layout(DEFINITIONS["TrainingRun"])
    nodes = drawn.nodes
    assert nodes["CheckFileSystem"].layer < nodes["FileSystemAvailable?"].layer < \
        nodes["WaitForFileSystem"].layer
    back = next(e for e in drawn.edges
                if (e.source, e.target) == ("WaitForFileSystem", "CheckFileSystem"))
    assert back.points[-1][1] == nodes["CheckFileSystem"].y + nodes["CheckFileSystem"].height
    assert nodes[END].layer == max(n.layer for n in nodes.values())


def test_a_state_that_catches_into_itself_gets_a_loop_at_its_side():
    drawn = layout(DEFINITIONS["TrainingRun"])
    loop = next(e for e in drawn.edges if e.source == e.target == "AwaitTrainingJob")
    node = drawn.nodes["AwaitTrainingJob"]
    assert all(x >= node.x + node.width / 2 for x, _ in loop.points)


def test_state_names_are_escaped():
    definition = {"StartAt": "<b>&", "States": {"<b>&": {"Type": "Succeed"}}}
    drawing = ET.fromstring(svg(definition, '"title"'))
    assert [g.get("data-state") for g in drawing.iter(f"{SVG}g") if g.get("data-state")] == [
        "<b>&"]


@pytest.fixture
def console():
    asked = []

    def definition(pipeline: str) -> dict:
        asked.append(pipeline)
        return DEFINITIONS[pipeline]

    found = Console(definition, {"emulated": True})
    found.asked = asked
    return found


def test_the_console_serves_its_page_files_settings_and_graphs(console):
    for path in ("/console", "/console/", "/console/index.html"):
        page = console.answer("GET", path)
        assert page["statusCode"] == 200 and "text/html" in page["headers"]["Content-Type"]
        assert 'src="/console/static/console.js"' in page["body"]
    script = console.answer("GET", "/console/static/console.js")
    assert script["headers"]["Content-Type"].startswith("text/javascript")
    assert "default-src 'self'" in script["headers"]["Content-Security-Policy"]
    assert json.loads(console.answer("GET", "/console/config.json")["body"]) == {
        "emulated": True}
    first = console.answer("GET", "/console/graphs/TrainingRun.svg")
    again = console.answer("HEAD", "/console/graphs/TrainingRun.svg")
    assert first["headers"]["Content-Type"] == "image/svg+xml" and first["body"] == again["body"]
    assert console.asked == ["TrainingRun"]  # drawn once


@pytest.mark.parametrize("path", ["/console/static/../app.py", "/console/static/.hidden",
                                  "/console/static/nothing.js", "/console/graphs/Other.svg",
                                  "/console/runs"])
def test_anything_else_under_the_console_is_a_json_404(console, path):
    answer = console.answer("GET", path)
    assert answer["statusCode"] == 404
    assert "is not a page of the console" in json.loads(answer["body"])["message"]


def test_the_console_is_read_only_and_leaves_other_paths_to_the_api(console):
    refused = console.answer("POST", "/console")
    assert (refused["statusCode"], refused["headers"]["Allow"]) == (405, "GET, HEAD")
    assert console.answer("GET", "/runs") is None
    assert console.answer("GET", "/consoles") is None
