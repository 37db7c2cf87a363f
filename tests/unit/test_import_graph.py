"""The first-party packages import each other without cycles, module by module and package by
package, and each module's name says what it holds.

Every ``import`` and ``from … import`` of a first-party module counts, at module level and
inside functions alike: a lazy import hides a knot from the interpreter, not from the reader.
At package level a module counts as its package (``traingrid.db.models`` as ``traingrid.db``;
a root package's own modules as the root), so ``db`` importing ``campaigns`` while ``campaigns``
imports ``db`` is a knot even when no two modules import each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = {
    "traingrid": ROOT / "layers" / "traingrid" / "python" / "traingrid",
    "traingrid_local": ROOT / "src" / "traingrid_local",
    "traingrid_node": ROOT / "containers" / "mnp" / "traingrid_node",
    "traingrid_trainer": ROOT / "containers" / "mnp" / "traingrid_trainer",
}


def _modules() -> dict[str, Path]:
    found = {}
    for package, root in PACKAGE_ROOTS.items():
        if not root.is_dir():
            continue
        for path in root.rglob("*.py"):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The first-party modules ``module`` imports (a name imported from a package counts as
    its submodule when there is one)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in known else base)
    return {target for target in targets if target in known and target != module}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {module: _imported(module, path, known) for module, path in modules.items()}


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen package by package: an edge between two packages for every import
    from a module of one to a module of the other."""
    modules = _modules()

    def package(module: str) -> str:
        is_package = modules[module].name == "__init__.py"
        return module if is_package else module.rpartition(".")[0]

    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        edges = packages.setdefault(package(module), set())
        edges.update(package(target) for target in targets if package(target) != package(module))
    return packages


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path that ends where it starts, or None."""
    state: dict[str, str] = {}  # "open" while on the path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_first_party_packages_have_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50, "the import graph should hold every first-party module"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_first_party_packages_have_no_package_level_cycle():
    packages = package_graph(import_graph())
    assert {"traingrid.vocabulary", "traingrid.db", "traingrid_local.cli"} <= set(packages)
    cycle = find_cycle(packages)
    assert cycle is None, "package-level import cycle: " + " -> ".join(cycle or [])


def test_the_shared_vocabulary_imports_nothing_of_the_features() -> None:
    """``traingrid.vocabulary`` is what the data layer, the steps and the janitor share: it
    depends on none of them (standard library only)."""
    graph = import_graph()
    vocabulary = {m: t for m, t in graph.items() if m.startswith("traingrid.vocabulary")}
    assert vocabulary and all(t <= set(vocabulary) for t in vocabulary.values()), vocabulary


# The runtime package's layers, bottom up (docs/layout.md): a package imports only those of
# lower layers, never one of its own layer or above.
RUNTIME_LAYERS = (
    {"traingrid", "traingrid.vocabulary"},  # errors, clock, naming, settings, validation, …
    {"traingrid.aws"},
    {"traingrid.db"},
    {"traingrid.costs", "traingrid.notifications"},
    {"traingrid.training"},
    {"traingrid.runs"},
    {"traingrid.campaigns", "traingrid.janitor"},
    {"traingrid.api"},
)


def test_the_runtime_packages_import_only_the_layers_below_their_own() -> None:
    packages = package_graph(import_graph())
    runtime = {p for p in packages if p == "traingrid" or p.startswith("traingrid.")}
    layer_of = {package: rank for rank, layer in enumerate(RUNTIME_LAYERS) for package in layer}
    assert runtime == set(layer_of), f"a package without a layer: {runtime ^ set(layer_of)}"
    upward = {(package, target) for package in runtime for target in packages[package]
              if target in layer_of and layer_of[target] >= layer_of[package]}
    assert not upward, f"imports of the same layer or above: {sorted(upward)}"


def test_only_the_adapters_make_clients_and_read_aws_errors() -> None:
    """docs/layout.md: every client comes from ``aws/clients.py`` (botocore's session, without
    boto3), and botocore's errors are read in the adapters (``aws/``) alone, which translate
    them, so nothing above them sees a ClientError."""
    runtime = PACKAGE_ROOTS["traingrid"]
    sessions, botocore_users = set(), set()
    for path in runtime.rglob("*.py"):
        name = str(path.relative_to(runtime))
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for module in modules:
                if module.split(".")[0] in ("boto3", "botocore"):
                    botocore_users.add(name)
                if module in ("boto3", "botocore.session"):
                    sessions.add(name)
    assert sessions == {"aws/clients.py"}, sessions
    assert botocore_users and all(n.startswith("aws/") for n in botocore_users), botocore_users


def test_no_two_modules_of_a_package_share_a_name() -> None:
    """Within each first-party package, a module's name is its own: two ``records.py`` meaning
    different things make a reader open both."""
    for package, root in PACKAGE_ROOTS.items():
        seen: dict[str, list[str]] = {}
        for path in root.rglob("*.py"):
            if path.stem not in {"__init__", "__main__"}:
                seen.setdefault(path.stem, []).append(str(path.relative_to(root)))
        repeated = {name: paths for name, paths in seen.items() if len(paths) > 1}
        assert not repeated, f"{package}: {repeated}"


def test_a_cycle_is_found_and_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_only_the_request_steps_load_pydantic() -> None:
    """The request models (pydantic) cost ~80 ms of every cold start that loads them: the plan
    and the janitor's release step, which shares its constants, must not."""
    import subprocess
    import sys

    probe = ("import sys; import traingrid.training.plan, traingrid.janitor.release; "
             "print('pydantic' in sys.modules)")
    env = {"PYTHONPATH": str(ROOT / "layers" / "traingrid" / "python")}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env=env, check=True)
    assert result.stdout.strip() == "False"


def test_no_module_is_over_450_lines() -> None:
    """Small modules: a file a reader can hold whole (tests aside)."""
    roots = [*PACKAGE_ROOTS.values(), ROOT / "functions", ROOT / "containers"]
    long = {str(path.relative_to(ROOT)): lines for root in roots for path in root.rglob("*.py")
            if (lines := len(path.read_text().splitlines())) > 450}
    assert not long, long
