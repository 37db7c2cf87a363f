"""The AWS operations a function's code and a state machine's tasks can call, read from their
source: Python with ``ast`` (nothing is imported or run), the ASL as JSON.

A function's code is its handler module and what that reaches in the runtime package: the
functions and classes it calls or names, followed from function to function, and the top
level of every module it imports (an import runs it). A class counts with all its methods.

Runtime code gets its AWS clients from ``traingrid.aws.clients.client(service[, region])``
only (a test holds it to that). A client is used where it is made
(``client("batch").describe_jobs(...)``), through a local name or an attribute of ``self``
bound to it, or handed to a library class that keeps it in an attribute (Powertools'
idempotency store): that class's calls through the attribute count. A paginator counts as the
operation it pages. Any other use of a client is an error (UnfollowedClient), so no call can
go unseen.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session

from tests.iam_actions import actions_of
from traingrid_local.emulator.lambda_inprocess import IAM_PREFIXES

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "layers" / "traingrid" / "python"
PACKAGE = "traingrid"
CLIENT_FACTORY = ("traingrid.aws.clients", "client")
# Attributes of a client that are not operations.
CLIENT_ATTRIBUTES = {"exceptions", "meta", "can_paginate"}
# Step Functions' names of SDK services, where they differ from botocore's.
ASL_SERVICES = {"sfn": "stepfunctions"}

Scope = ast.AST  # a function, a class, or the top level of a module (ast.Module)


@dataclass(frozen=True)
class Call:
    operation: str  # IAM prefix and API name: "states:StartExecution"
    parameters: frozenset[str] | None  # the parameter names it passes; None: not known
    where: str

    def actions(self) -> set[str]:
        return actions_of(self.operation, self.parameters)


class UnfollowedClient(Exception):
    """A client used in a way the collector cannot follow to its calls."""


@cache
def _operations(service: str) -> tuple[str, dict[str, str]]:
    """(IAM prefix, client method name → API operation name) of a service."""
    model = botocore.session.get_session().get_service_model(service)
    prefix = IAM_PREFIXES.get(model.signing_name, model.signing_name)  # monitoring: cloudwatch
    return prefix, {botocore.xform_name(op): op for op in model.operation_names}


def operation(service: str, method: str, where: str) -> str:
    prefix, methods = _operations(service)
    if method not in methods:
        raise UnfollowedClient(f"{where}: {service} has no operation {method}")
    return f"{prefix}:{methods[method]}"


# --- Modules and names -------------------------------------------------------------------------

class Module:
    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path
        self.tree = ast.parse(path.read_text(), str(path))
        self.package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.defs: dict[str, ast.AST] = {
            node.name: node for node in self.tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        self.imports = imports_in(_top_level_statements(self.tree.body), self.package)
        self.top_level = _top_level(self)

    def where(self, node: ast.AST) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{getattr(node, 'lineno', 0)}"


def _top_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at import, through if/try blocks, not into functions or classes."""
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        yield statement
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _top_level_statements(getattr(statement, field, []))


def imports_in(nodes: Any, package: str) -> dict[str, tuple[str, str | None]]:
    """local name → (module, attribute or None) of the imports among ``nodes``."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    found[top] = (top, None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                found[alias.asname or alias.name] = (base, alias.name)
    return found


class Sources:
    """Modules by name: the runtime package from ``runtime``, anything else from sys.path."""

    def __init__(self, runtime: Path = RUNTIME) -> None:
        self.runtime = runtime
        self.modules: dict[str, Module | None] = {}
        self.scans: dict[ast.AST, tuple[list[Any], set[Call]]] = {}

    def module(self, name: str) -> Module | None:
        if name not in self.modules:
            roots = [self.runtime] if name.split(".")[0] == PACKAGE else [
                Path(p) for p in sys.path if p]
            self.modules[name] = next(
                (Module(name, path) for root in roots
                 for path in (root.joinpath(*name.split(".")).with_suffix(".py"),
                              root.joinpath(*name.split("."), "__init__.py"))
                 if path.is_file()), None)
        return self.modules[name]

    def resolve(self, module_name: str, attribute: str | None, depth: int = 0
                ) -> tuple[Module, ast.AST | None] | None:
        """What ``from module_name import attribute`` names: (module, None) for a module,
        (module, definition) for a function or class; None if unknown."""
        if attribute is None:
            module = self.module(module_name)
            return (module, None) if module else None
        if submodule := self.module(f"{module_name}.{attribute}"):
            return submodule, None
        module = self.module(module_name)
        if module is None or depth > 10:
            return None
        if attribute in module.defs:
            return module, module.defs[attribute]
        if attribute in module.imports:  # a name the module imports and re-exports
            return self.resolve(*module.imports[attribute], depth=depth + 1)
        return None


def _variables(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
    """A function's own variables: its parameters and the names it assigns (not those of the
    functions it defines)."""
    arguments = function.args
    names = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                             arguments.vararg, arguments.kwarg] if a}
    body = function.body if isinstance(function.body, list) else [function.body]
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            continue
        if not isinstance(node, ast.Lambda):
            todo += ast.iter_child_nodes(node)
    return frozenset(names)


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


class Names:
    """What names mean in one scope: its own imports, then its module's imports and defs,
    unless the scope binds the name itself (a parameter or a variable)."""

    def __init__(self, sources: Sources, module: Module, scope: Scope) -> None:
        self.sources, self.module = sources, module
        local = [n for n in ast.walk(scope) if isinstance(n, ast.Import | ast.ImportFrom)]
        self.imports = module.imports | imports_in(local, module.package)
        self.variables: dict[ast.AST, frozenset[str]] = {}
        self._scan_variables(scope, frozenset())

    def _scan_variables(self, node: ast.AST, visible: frozenset[str]) -> None:
        """Note, for every node, the variables of the functions it is in."""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            visible = visible | _variables(node)
        for child in ast.iter_child_nodes(node):
            self.variables[child] = visible
            self._scan_variables(child, visible)

    def resolve(self, node: ast.AST, libraries: bool = False
                ) -> tuple[Module, ast.AST | None] | None:
        """The module or definition a name or dotted name refers to. Names of library modules
        resolve only with ``libraries``."""
        parts = _dotted(node)
        if not parts or parts[0] in self.variables.get(node, frozenset()):
            return None
        first, rest = parts[0], parts[1:]
        if first in self.imports:
            if not libraries and self.imports[first][0].split(".")[0] != PACKAGE:
                return None
            found = self.sources.resolve(*self.imports[first])
        elif first in self.module.defs:
            found = (self.module, self.module.defs[first])
        else:
            return None
        for attribute in rest:
            if found is None or found[1] is not None:
                break  # an attribute of a function or class: the definition itself counts
            found = self.sources.resolve(found[0].name, attribute)
        return found

    def is_client_factory(self, call: ast.AST) -> bool:
        if not isinstance(call, ast.Call):
            return False
        found = self.resolve(call.func)
        return bool(found and found[1] is not None and (found[0].name, getattr(
            found[1], "name", None)) == CLIENT_FACTORY)


# --- Clients and their calls -------------------------------------------------------------------

def _parents(scope: Scope) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(scope) for child in ast.iter_child_nodes(node)}


def _keys(expression: ast.AST, scope: Scope) -> set[str] | None:
    """The keys a ``**expression`` passes, when the source says; None when it does not."""
    if isinstance(expression, ast.Dict):
        keys: set[str] = set()
        for key, value in zip(expression.keys, expression.values, strict=True):
            if key is None:
                inner = _keys(value, scope)
                if inner is None:
                    return None
                keys |= inner
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                keys.add(key.value)
            else:
                return None
        return keys
    if isinstance(expression, ast.IfExp):
        body, orelse = _keys(expression.body, scope), _keys(expression.orelse, scope)
        return None if body is None or orelse is None else body | orelse
    if isinstance(expression, ast.Name):
        values = [n.value for n in ast.walk(scope) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == expression.id for t in n.targets)]
        found = [_keys(v, scope) for v in values]
        if not found or any(k is None for k in found):
            return None
        return set().union(*found)
    return None


def _parameters(call: ast.Call, scope: Scope) -> frozenset[str] | None:
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    names: set[str] = set()
    for keyword in call.keywords:
        if keyword.arg is not None:
            names.add(keyword.arg)
            continue
        keys = _keys(keyword.value, scope)
        if keys is None:
            return None
        names |= keys
    return frozenset(names)


def _service(call: ast.Call, where: str) -> str:
    first = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "service"), None)
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        raise UnfollowedClient(f"{where}: client() of a service not named in the source")
    return first.value


class ClientUses:
    """The calls made through the clients of one scope (a function, a class's methods, or a
    module's top level)."""

    def __init__(self, sources: Sources, module: Module, scope: Scope) -> None:
        self.sources, self.module, self.scope = sources, module, scope
        self.names = Names(sources, module, scope)
        self.parents = _parents(scope)
        self.calls: set[Call] = set()

    def collect(self) -> set[Call]:
        bound_names: dict[str, str] = {}
        bound_attributes: dict[str, str] = {}
        for node in ast.walk(self.scope):
            if not self.names.is_client_factory(node):
                continue
            where = self.module.where(node)
            service = _service(node, where)
            target = self._binding(node)
            if isinstance(target, ast.Name) and not self._in_function(node):
                raise UnfollowedClient(f"{where}: a client kept at module or class level; make "
                                       "it where it is used (clients.client caches it)")
            if isinstance(target, ast.Name):
                bound_names[target.id] = service
            elif isinstance(target, ast.Attribute):
                bound_attributes[target.attr] = service
            else:
                self._use(node, service, where)
        for node in ast.walk(self.scope):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                    and node.id in bound_names:
                self._use(node, bound_names[node.id], self.module.where(node))
            elif (isinstance(node, ast.Attribute) and _is_self(node.value)
                  and node.attr in bound_attributes and isinstance(node.ctx, ast.Load)):
                self._use(node, bound_attributes[node.attr], self.module.where(node))
        return self.calls

    def _in_function(self, node: ast.AST) -> bool:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return True
        return False

    def _binding(self, client: ast.Call) -> ast.AST | None:
        """The local name or ``self`` attribute an assignment binds the client to."""
        parent = self.parents.get(client)
        value_index = None
        if isinstance(parent, ast.Tuple) and isinstance(self.parents.get(parent), ast.Assign):
            value_index = parent.elts.index(client)
            parent = self.parents[parent]
        if not isinstance(parent, ast.Assign) or len(parent.targets) != 1:
            return None
        target = parent.targets[0]
        if value_index is not None:
            if not isinstance(target, ast.Tuple):
                return None
            target = target.elts[value_index]
        if isinstance(target, ast.Name) or (isinstance(target, ast.Attribute)
                                            and _is_self(target.value)):
            return target
        return None

    def _use(self, client: ast.AST, service: str, where: str) -> None:
        """``client`` is an expression whose value is a client: what does the code do with it?"""
        parent = self.parents.get(client)
        if isinstance(parent, ast.Attribute) and parent.attr in CLIENT_ATTRIBUTES:
            return
        call = self.parents.get(parent) if isinstance(parent, ast.Attribute) else None
        if isinstance(call, ast.Call) and call.func is parent:
            if parent.attr == "get_paginator":
                method = call.args[0].value if call.args and isinstance(
                    call.args[0], ast.Constant) else None
                if not isinstance(method, str):
                    raise UnfollowedClient(f"{where}: a paginator not named in the source")
                self.calls.add(Call(operation(service, method, where), None, where))
            else:
                self.calls.add(Call(operation(service, parent.attr, where),
                                    _parameters(call, self.scope), where))
            return
        if isinstance(parent, ast.keyword) and isinstance(self.parents.get(parent), ast.Call):
            self.calls |= self._handed_over(self.parents[parent], parent.arg, service, where)
            return
        raise UnfollowedClient(
            f"{where}: a {service} client used in a way this collector does not follow; call "
            "its operations where it is made or through a name bound to it")

    def _handed_over(self, call: ast.Call, keyword: str | None, service: str,
                     where: str) -> set[Call]:
        """The calls a library class makes through the attribute it keeps the client in."""
        found = self.names.resolve(call.func, libraries=True)
        if keyword is None or found is None or not isinstance(found[1], ast.ClassDef) \
                or found[0].name.split(".")[0] == PACKAGE:
            raise UnfollowedClient(f"{where}: a {service} client handed to code whose use of "
                                   "it this collector does not follow")
        module, cls = found
        attributes = {
            target.attr for node in ast.walk(cls) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Name) and node.value.id == keyword
            for target in node.targets
            if isinstance(target, ast.Attribute) and _is_self(target.value)}
        calls = set()
        for node in ast.walk(cls):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Attribute)
                    and _is_self(node.func.value.value)
                    and node.func.value.attr in attributes
                    and node.func.attr not in CLIENT_ATTRIBUTES):
                inner = module.where(node)
                calls.add(Call(operation(service, node.func.attr, inner),
                               _parameters(node, cls), inner))
        if not calls:
            raise UnfollowedClient(f"{where}: {cls.name} makes no call this collector sees "
                                   f"with the {service} client it is given")
        return calls


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


# --- What a handler reaches --------------------------------------------------------------------

def _top_level(module: Module) -> ast.Module:
    """What runs when a module is imported: its statements, decorators and class bodies."""
    body: list[ast.stmt] = list(_top_level_statements(module.tree.body))
    for node in module.defs.values():
        body += [ast.Expr(d) for d in getattr(node, "decorator_list", [])]
        if isinstance(node, ast.ClassDef):
            body += [ast.Expr(b) for b in node.bases]
            body += [s for s in node.body if not isinstance(
                s, ast.FunctionDef | ast.AsyncFunctionDef)]
    return ast.Module(body=body, type_ignores=[])


Reached = tuple[Module, ast.AST | None]  # a module (None: its top level) or a definition


def _scan(sources: Sources, module: Module, scope: Scope) -> tuple[list[Reached], set[Call]]:
    """What one scope refers to in the runtime package, and the AWS calls it makes."""
    names = Names(sources, module, scope)
    reached: list[Reached] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for imported, attribute in imports_in([node], module.package).values():
                if imported.split(".")[0] != PACKAGE:
                    continue
                # An import runs modules; a function or class it names counts where used.
                for found in (sources.resolve(imported, None),
                              attribute and sources.resolve(imported, attribute)):
                    if found and found[1] is None:
                        reached.append(found)
        elif isinstance(node, ast.Name | ast.Attribute) and (found := names.resolve(node)):
            reached.append(found)
    return reached, ClientUses(sources, module, scope).collect()


class Reach:
    """The scopes a handler reaches, and their AWS calls. Scans are kept in ``sources``, so
    handlers that share code scan it once."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.done: set[ast.AST] = set()
        self.todo: list[tuple[Module, Scope]] = []

    def add(self, module: Module, definition: ast.AST | None = None) -> None:
        if module.name.split(".")[0] != PACKAGE and module.name != "app":
            return
        scope = definition if definition is not None else module.top_level
        if scope in self.done:
            return
        self.done.add(scope)
        self.todo.append((module, scope))
        if definition is not None:
            self.add(module)
        elif package := self.sources.module(module.name.rpartition(".")[0]):
            self.add(package)  # a package's __init__ runs before its modules

    def run(self) -> set[Call]:
        calls: set[Call] = set()
        while self.todo:
            module, scope = self.todo.pop()
            if scope not in self.sources.scans:
                self.sources.scans[scope] = _scan(self.sources, module, scope)
            reached, found = self.sources.scans[scope]
            calls |= found
            for item in reached:
                self.add(*item)
        return calls


def handler_calls(code: Path, handler: str = "app.lambda_handler",
                  sources: Sources | None = None) -> set[Call]:
    """Every AWS call the handler ``handler`` in folder ``code`` can make."""
    sources = sources or Sources()
    module_name, _, function = handler.rpartition(".")
    module = Module("app", code.joinpath(*module_name.split(".")).with_suffix(".py"))
    reach = Reach(sources)
    reach.add(module)
    reach.add(module, module.defs[function])
    return reach.run()


def function_calls(template: dict[str, Any], root: Path = ROOT) -> dict[str, set[Call]]:
    """logical id → the AWS calls of every AWS::Serverless::Function of a SAM template."""
    default = template.get("Globals", {}).get("Function", {}).get("Handler", "app.lambda_handler")
    sources = Sources()
    return {
        logical_id: handler_calls(root / resource["Properties"]["CodeUri"],
                                  resource["Properties"].get("Handler", default), sources)
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


# --- State machines ----------------------------------------------------------------------------

SDK_TASK = re.compile(r"arn:\$\{Partition\}:states:::aws-sdk:([\w-]+):(\w+)")
LAMBDA_TASK = re.compile(r"arn:\$\{Partition\}:states:::lambda:invoke(\.waitForTaskToken)?")
NESTED_TASK = re.compile(r"arn:\$\{Partition\}:states:::states:startExecution\.sync(:2)?")
# What a nested workflow's Run a Job (.sync) task does with the parent's role ("IAM policies
# for calling nested Step Functions workflows", Step Functions Developer Guide): it starts the
# child, describes it while it waits, stops it if the parent's task is stopped, and learns of
# its end through a managed EventBridge rule.
NESTED_SYNC_CALLS = ("states:StartExecution", "states:DescribeExecution", "states:StopExecution",
                     "events:PutTargets", "events:PutRule", "events:DescribeRule")
SUBSTITUTION = re.compile(r"\$\{([A-Za-z0-9]+)\}")


def states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state, including those of Map and Parallel branches."""
    found = dict(definition["States"])
    for state in definition["States"].values():
        for branch in [state.get("ItemProcessor") or state.get("Iterator"),
                       *state.get("Branches", [])]:
            if branch:
                found |= states(branch)
    return found


def asl_calls(definition: dict[str, Any]) -> set[Call]:
    """The AWS calls of every Task state. A Task whose Resource is a ``${Substitution}`` is a
    Lambda function's ARN."""
    calls = set()
    for name, state in states(definition).items():
        if state["Type"] != "Task":
            continue
        resource = state["Resource"]
        parameters = frozenset(k.removesuffix(".$") for k in state.get("Parameters", {}))
        if match := SDK_TASK.fullmatch(resource):
            service, api = match.groups()
            method = botocore.xform_name(api[0].upper() + api[1:])
            calls.add(Call(operation(ASL_SERVICES.get(service, service), method, name),
                           parameters, name))
        elif NESTED_TASK.fullmatch(resource):
            calls |= {Call(action, None, name) for action in NESTED_SYNC_CALLS}
        elif LAMBDA_TASK.fullmatch(resource) or SUBSTITUTION.fullmatch(resource):
            calls.add(Call("lambda:InvokeFunction", parameters, name))
        else:
            raise UnfollowedClient(f"{name}: a Task resource this collector does not know: "
                                   f"{resource}")
    return calls
