"""A state machine's graph as SVG, drawn from its Amazon States Language definition.

The console colours the graph in the browser from ``GET /runs/{name}``; this module only
draws it, once per definition. Each state is a ``<g data-state="Name">``; Map and Parallel
states hold their own graphs. Layout is a small layered (Sugiyama) drawing — cycles broken by
depth-first search, longest-path layers, barycentre ordering, least-squares placement — so
loops read top to bottom as in the Step Functions console, with no library and no browser
work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

START, END = "\x00start", "\x00end"
ROW_GAP, COLUMN_GAP, MARGIN = 46, 28, 16
NODE_HEIGHT, CHAR_WIDTH, DUMMY_WIDTH = 34, 7.4, 8
FRAME_HEADER, FRAME_PAD = 30, 14
SWEEPS = 8


@dataclass
class Node:
    id: str
    kind: str  # a state's Type, "start", "end" or "dummy"
    width: float
    height: float
    inner: list[Layout] = field(default_factory=list)  # a Map's or Parallel's graphs
    layer: int = 0
    x: float = 0.0  # centre
    y: float = 0.0  # top


@dataclass
class Edge:
    source: str
    target: str
    kind: str  # next, choice, default, catch
    points: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class Layout:
    nodes: dict[str, Node]
    edges: list[Edge]
    width: float
    height: float


def transitions(state: dict[str, Any]) -> list[tuple[str, str]]:
    """(target, kind) of every transition out of a state, in the definition's order."""
    found = [(choice["Next"], "choice") for choice in state.get("Choices", [])]
    if "Default" in state:
        found.append((state["Default"], "default"))
    if "Next" in state:
        found.append((state["Next"], "next"))
    found += [(catch["Next"], "catch") for catch in state.get("Catch", [])]
    if state.get("End") or state["Type"] in ("Succeed", "Fail"):
        found.append((END, "next"))
    return list(dict.fromkeys(found))


def _inner_graphs(state: dict[str, Any]) -> list[dict[str, Any]]:
    if state["Type"] == "Map":
        return [state.get("ItemProcessor") or state["Iterator"]]
    if state["Type"] == "Parallel":
        return list(state["Branches"])
    return []


def _label_width(text: str) -> float:
    return max(96.0, len(text) * CHAR_WIDTH + 26)


def _nodes(graph: dict[str, Any]) -> dict[str, Node]:
    nodes = {START: Node(START, "start", 52, 24)}
    for name, state in graph["States"].items():
        inner = [layout(branch) for branch in _inner_graphs(state)]
        if inner:
            width = max(_label_width(name), sum(i.width for i in inner)
                        + COLUMN_GAP * (len(inner) - 1) + 2 * FRAME_PAD)
            height = FRAME_HEADER + max(i.height for i in inner) + FRAME_PAD
            nodes[name] = Node(name, state["Type"], width, height, inner)
        else:
            nodes[name] = Node(name, state["Type"], _label_width(name), NODE_HEIGHT)
    nodes[END] = Node(END, "end", 52, 24)
    return nodes


def _forward(nodes: dict[str, Node], edges: list[Edge]) -> list[tuple[str, str, Edge]]:
    """Every edge as it runs down the drawing: depth-first from the start, an edge back to a
    state still being explored (a loop) is turned round. Self-loops are left out."""
    successors: dict[str, list[Edge]] = {name: [] for name in nodes}
    for edge in edges:
        successors[edge.source].append(edge)
    colour: dict[str, int] = {}
    backward: set[int] = set()

    def visit(name: str) -> None:
        colour[name] = 1
        for edge in successors[name]:
            if colour.get(edge.target) == 1:
                backward.add(id(edge))
            elif edge.target not in colour:
                visit(edge.target)
        colour[name] = 2

    for name in nodes:  # the start first, then anything it does not reach
        if name not in colour:
            visit(name)
    return [(e.target, e.source, e) if id(e) in backward else (e.source, e.target, e)
            for e in edges if e.source != e.target]


def _layers(nodes: dict[str, Node], forward: list[tuple[str, str, Edge]]) -> None:
    """Longest path from the start; the end sits alone on the last layer."""
    incoming: dict[str, list[str]] = {name: [] for name in nodes}
    for upper, lower, _ in forward:
        incoming[lower].append(upper)
    done: dict[str, int] = {}

    def depth(name: str) -> int:
        if name not in done:
            done[name] = 0  # guards a cycle the forward edges cannot have
            done[name] = max((depth(u) + 1 for u in incoming[name]), default=0)
        return done[name]

    for name, node in nodes.items():
        node.layer = depth(name)
    nodes[END].layer = max(n.layer for n in nodes.values() if n.id != END) + 1


def _chains(nodes: dict[str, Node], forward: list[tuple[str, str, Edge]]
            ) -> list[tuple[list[str], Edge, bool]]:
    """Each edge as a chain of node ids one layer apart, with dummy nodes in between."""
    chains = []
    for number, (upper, lower, edge) in enumerate(forward):
        chain = [upper]
        for layer in range(nodes[upper].layer + 1, nodes[lower].layer):
            dummy = f"\x00dummy{number}.{layer}"
            nodes[dummy] = Node(dummy, "dummy", DUMMY_WIDTH, NODE_HEIGHT, layer=layer)
            chain.append(dummy)
        chain.append(lower)
        chains.append((chain, edge, upper != edge.source))
    return chains


def _order(nodes: dict[str, Node], chains: list[tuple[list[str], Edge, bool]]
           ) -> list[list[str]]:
    """Nodes of each layer, left to right: barycentre sweeps down and up."""
    rows: list[list[str]] = [[] for _ in range(max(n.layer for n in nodes.values()) + 1)]
    for name, node in nodes.items():
        rows[node.layer].append(name)
    above: dict[str, list[str]] = {name: [] for name in nodes}
    below: dict[str, list[str]] = {name: [] for name in nodes}
    for chain, _, _ in chains:
        for upper, lower in zip(chain, chain[1:], strict=False):
            below[upper].append(lower)
            above[lower].append(upper)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        sequence = range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)
        for index in sequence:
            reference = rows[index - 1] if downward else rows[index + 1]
            rows[index] = _by_barycentre(rows[index], reference, above if downward else below)
    return rows


def _by_barycentre(row: list[str], reference: list[str], neighbours: dict[str, list[str]]
                   ) -> list[str]:
    """``row`` sorted by the mean position of each node's neighbours in ``reference``; a node
    without any keeps its place."""
    position = {name: i for i, name in enumerate(reference)}

    def barycentre(index_and_name: tuple[int, str]) -> float:
        index, name = index_and_name
        found = [position[n] for n in neighbours[name] if n in position]
        return sum(found) / len(found) if found else index

    return [name for _, name in sorted(enumerate(row), key=barycentre)]


def _place_row(row: list[Node], wanted: list[float]) -> None:
    """Centres as near the wanted ones as the row's order and gaps allow (least squares)."""
    offsets, total = [], 0.0
    for node in row:
        offsets.append(total + node.width / 2)
        total += node.width + COLUMN_GAP
    blocks: list[list[int]] = []  # [first, last] indices; a block moves as one
    for i in range(len(row)):
        blocks.append([i, i])
        while len(blocks) > 1:
            left, right = blocks[-2], blocks[-1]
            if _block_start(left, offsets, wanted) + offsets[right[0]] - offsets[left[0]] <= \
                    _block_start(right, offsets, wanted):
                break
            blocks[-2:] = [[left[0], right[1]]]
    for first, last in blocks:
        start = _block_start([first, last], offsets, wanted)
        for i in range(first, last + 1):
            row[i].x = start + offsets[i] - offsets[first]


def _block_start(block: list[int], offsets: list[float], wanted: list[float]) -> float:
    first, last = block
    return sum(wanted[i] - (offsets[i] - offsets[first]) for i in range(first, last + 1)) / (
        last - first + 1)


def _coordinates(nodes: dict[str, Node], rows: list[list[str]],
                 chains: list[tuple[list[str], Edge, bool]]) -> tuple[float, float]:
    neighbours: dict[str, list[str]] = {name: [] for name in nodes}
    for chain, _, _ in chains:
        for upper, lower in zip(chain, chain[1:], strict=False):
            neighbours[upper].append(lower)
            neighbours[lower].append(upper)
    for row in rows:
        _place_row([nodes[n] for n in row], [0.0] * len(row))
    for sweep in range(SWEEPS):
        sequence = rows[1:] if sweep % 2 == 0 else rows[-2::-1]
        for row in sequence:
            wanted = []
            for name in row:
                found = [nodes[n].x for n in neighbours[name]]
                wanted.append(sum(found) / len(found) if found else nodes[name].x)
            _place_row([nodes[n] for n in row], wanted)
    left = min(n.x - n.width / 2 for n in nodes.values())
    top: float = MARGIN
    for row in rows:
        height = max(nodes[n].height for n in row)
        for name in row:
            nodes[name].x += MARGIN - left
            nodes[name].y = top + (height - nodes[name].height) / 2
        top += height + ROW_GAP
    width = max(n.x + n.width / 2 for n in nodes.values()) + MARGIN
    return width, top - ROW_GAP + MARGIN


def _route(nodes: dict[str, Node], chains: list[tuple[list[str], Edge, bool]]) -> None:
    for chain, edge, turned in chains:
        points = []
        for i, name in enumerate(chain):
            node = nodes[name]
            if node.kind == "dummy":
                points += [(node.x, node.y), (node.x, node.y + node.height)]
            elif i == 0:
                points.append((node.x, node.y + node.height))
            else:
                points.append((node.x, node.y))
        edge.points = points[::-1] if turned else points


def layout(graph: dict[str, Any]) -> Layout:
    """Where every state of ``graph`` (``{"StartAt", "States"}``) and every transition go."""
    nodes = _nodes(graph)
    edges = [Edge(START, graph["StartAt"], "next")]
    for name, state in graph["States"].items():
        edges += [Edge(name, target, kind) for target, kind in transitions(state)]
    forward = _forward(nodes, edges)
    _layers(nodes, forward)
    chains = _chains(nodes, forward)
    rows = _order(nodes, chains)
    width, height = _coordinates(nodes, rows, chains)
    _route(nodes, chains)
    for edge in edges:
        if edge.source == edge.target:  # a state that catches into itself: a loop at its side
            node = nodes[edge.source]
            right, middle = node.x + node.width / 2, node.y + node.height / 2
            edge.points = [(right, middle - 6), (right + 18, middle), (right, middle + 6)]
    return Layout({k: v for k, v in nodes.items() if v.kind != "dummy"}, edges, width, height)


def _path(points: list[tuple[float, float]]) -> str:
    (x, y), rest = points[0], points[1:]
    parts = [f"M{x:.1f},{y:.1f}"]
    for next_x, next_y in rest:
        bend = (next_y - y) / 2
        parts.append(f"C{x:.1f},{y + bend:.1f} {next_x:.1f},{next_y - bend:.1f} "
                     f"{next_x:.1f},{next_y:.1f}")
        x, y = next_x, next_y
    return "".join(parts)


def _draw(graph: Layout, out: list[str], by_state: dict[str, dict[str, Any]] | None) -> None:
    for edge in graph.edges:
        out.append(f'<path class="edge {edge.kind}" d="{_path(edge.points)}" '
                   f'marker-end="url(#arrow)"><title>{escape(_name(edge.source))} → '
                   f'{escape(_name(edge.target))} ({edge.kind})</title></path>')
    for node in graph.nodes.values():
        left, top = node.x - node.width / 2, node.y
        if node.kind in ("start", "end"):
            out.append(f'<g class="terminal" transform="translate({left:.1f},{top:.1f})">'
                       f'<rect width="{node.width}" height="{node.height}" rx="12"/>'
                       f'<text x="{node.width / 2}" y="16">{node.kind.title()}</text></g>')
            continue
        name = escape(node.id, quote=True)
        seen = None if by_state is None else by_state.get(node.id, {"outcome": "not-reached"})
        coloured = f' {seen["outcome"]}" data-outcome="{seen["outcome"]}' if seen else ""
        visits = f'×{seen["visits"]}' if seen and seen.get("visits", 1) > 1 else ""
        out.append(f'<g class="state {node.kind.lower()}{coloured}" data-state="{name}" '
                   f'transform="translate({left:.1f},{top:.1f})"><title>{name} ({node.kind})'
                   f'</title><rect width="{node.width:.1f}" height="{node.height:.1f}" rx="6"/>'
                   f'<text class="label" x="{node.width / 2:.1f}" y="{19 if node.inner else 21}">'
                   f'{name}</text><text class="visits" x="{node.width - 6:.1f}" y="-4">{visits}'
                   "</text>")
        x: float = FRAME_PAD
        for inner in node.inner:
            out.append(f'<g transform="translate({x:.1f},{FRAME_HEADER})">')
            _draw(inner, out, by_state)
            out.append("</g>")
            x += inner.width + COLUMN_GAP
        out.append("</g>")


def _name(node_id: str) -> str:
    return {START: "Start", END: "End"}.get(node_id, node_id)


def svg(definition: dict[str, Any], title: str, style: str = "",
        by_state: dict[str, dict[str, Any]] | None = None) -> str:
    """The whole drawing: a standalone SVG document that the console styles and colours in the
    browser — or that carries its own ``style`` sheet and is coloured already from a run's
    ``by_state`` (as ``GET /runs/{name}`` gives it)."""
    drawn = layout(definition)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img" '
           f'viewBox="0 0 {drawn.width:.0f} {drawn.height:.0f}" width="{drawn.width:.0f}" '
           f'height="{drawn.height:.0f}" aria-label="{escape(title, quote=True)}">'
           f'{f"<style><![CDATA[{style}]]></style>" if style else ""}'
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker>'
           "</defs>"]
    _draw(drawn, out, by_state)
    out.append("</svg>")
    return "".join(out)
