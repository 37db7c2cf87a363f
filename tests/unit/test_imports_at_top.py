"""Imports sit at the top of modules, where readers expect a module's dependencies, except
where a person waits: the API's routes (``traingrid/api/``) and the modules the API function
loads to answer them, whose cold start is part of a request. Every other import inside a
function is listed here with why (at most 10)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "traingrid" / "python" / "traingrid"
WHERE_A_PERSON_WAITS = PACKAGE / "api"
# module (from the package) → why its imports inside functions stay there.
ALLOWED = {
    "db/__init__.py": "the database's names load SQLAlchemy (twice boto3's import) on first "
                      "use: modules import `db` at their top, a cold start that never reaches "
                      "the database does not pay for it",
    "db/repositories.py": "the database's dialect (PostgreSQL's or SQLite's) for its upsert, "
                          "named by the engine at run time",
    "observability.py": "the X-Ray tracer's SDK is loaded only where tracing is on",
    "runs/reader.py": "GET /runs/{name}/metrics: the curves' reader, only for the requests that "
                      "read them",
    "runs/submit.py": "POST /runs: the request's pydantic model only for that route",
    "validation.py": "pydantic, for the API only when a request is parsed (every function "
                     "that parses has its model, and so pydantic, loaded already)",
}
MAX_OUTSIDE_THE_API = 10


def _imports(node: ast.AST) -> bool:
    """An import statement, or ``import_module(…)`` / ``importlib.import_module(…)``: a lazy
    import all the same."""
    called = isinstance(node, ast.Call) and "import_module" in (
        getattr(node.func, "id", None), getattr(node.func, "attr", None))
    return called or isinstance(node, ast.Import | ast.ImportFrom)


def imports_inside_functions(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found |= {inner.lineno for inner in ast.walk(node) if _imports(inner)}
    return sorted(found)


def test_imports_inside_functions_are_the_apis_or_listed_with_why():
    outside: dict[str, list[int]] = {}
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "functions").glob("*/app.py")]:
        if WHERE_A_PERSON_WAITS in path.parents:
            continue
        if lines := imports_inside_functions(path):
            name = str(path.relative_to(PACKAGE if PACKAGE in path.parents else ROOT))
            outside[name] = lines
    unlisted = {name: lines for name, lines in outside.items() if name not in ALLOWED}
    assert not unlisted, f"imports inside functions, outside the API's routes: {unlisted}"
    assert sum(map(len, outside.values())) <= MAX_OUTSIDE_THE_API, outside
    assert set(ALLOWED) <= set(outside), f"listed but at the top now: {set(ALLOWED) - set(outside)}"


def test_the_databases_names_load_on_first_use_and_are_what_they_name():
    import subprocess
    import sys

    probe = ("import sys; from traingrid import db; before = 'sqlalchemy' in sys.modules; "
             "import traingrid.db.ranking as r, traingrid.db.engine as e; "
             "ok = db.region_ranking is r.ranking and db.transaction is e.transaction; "
             "print(before, ok, all(getattr(db, n) for n in db.__all__))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True, env={"PYTHONPATH": str(PACKAGE.parent)})
    assert result.stdout.split() == ["False", "True", "True"], result.stdout + result.stderr


def test_the_databases_names_are_all_spelled_out_for_readers_and_mypy():
    from traingrid import db

    path = PACKAGE / "db" / "__init__.py"
    typed = {alias.asname or alias.name for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ImportFrom) and node.module != "__future__"
             and node.module not in ("importlib", "typing") for alias in node.names}
    submodules = {p.stem for p in path.parent.glob("*.py")}
    assert sorted(db.__all__) == sorted(db._WHERE) == sorted(typed)
    assert not set(db._WHERE) & submodules  # a submodule, once imported, would hide the name
