"""A write you can follow: from the memory routes, by name, to the domain and the recorder.

A reader, or a tool that follows calls by name (an IDE's go-to-definition), starts
at ``create_memory`` (``api/routers/_memories.py``) and must reach
:meth:`Memory.create <palimpsest.domain.memory.Memory.create>` and
:meth:`EventLog.record <palimpsest.projections.store.eventlog.EventLog.record>` by
clicking on called names. This test is such a tool, in miniature: it parses each
function with ``ast`` and resolves each called name through the module's imports,
its parameters' annotations, ``self`` and its class's annotated attributes. It
follows nothing else: a callable handed in as an argument and called there
(``func(*args)``), a spec dispatched through an abstract ``apply``, a bound method of
a dependency handed to a scheduling helper: at each of these the trail ends, and so
does the test.

One hop is taken by name on purpose: the route awaits the api's thread hop
(``palimpsest.api._worker_threads``) with the one named function of its write, as a
reader clicks on that name.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import textwrap
import types
import typing
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from palimpsest.api.routers import _memories
from palimpsest.domain import memory as domain_memory
from palimpsest.projections.commands import memories
from palimpsest.projections.store.eventlog import EventLog

EDGE = "palimpsest.api._worker_threads"
"""The api's edge module: its thread hop is not walked into; the named function
handed to it is."""

MAX_DEPTH = 8
"""How many calls deep the trail may go: a reader clicks a few times, not forty."""


@dataclass(frozen=True)
class _Instance:
    """A value known only by its class (a parameter's annotation, ``self``)."""

    cls: type


def _module_names(module: types.ModuleType) -> dict[str, str]:
    """Every name ``module`` imports at its top level, ``TYPE_CHECKING`` imports
    included, as the dotted path it names."""
    names: dict[str, str] = {}
    tree = ast.parse(inspect.getsource(module))
    nodes: list[ast.stmt] = list(tree.body)
    for node in tree.body:
        if isinstance(node, ast.If):  # if TYPE_CHECKING:
            nodes.extend(node.body)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name
    return names


def _load(dotted: str) -> Any:
    """The object a dotted path names: a module, or an attribute of one."""
    try:
        return importlib.import_module(dotted)
    except ImportError:
        module, _, name = dotted.rpartition(".")
        return getattr(importlib.import_module(module), name)


def _global(module: types.ModuleType, name: str) -> Any:
    if name in vars(module):
        return vars(module)[name]
    imported = _module_names(module).get(name)
    if imported is not None:
        return _load(imported)
    return getattr(builtins, name, None)


def _static_member(cls: type, name: str) -> Any:
    """``cls``'s own definition of ``name`` (through its bases), unwrapped to the function
    a reader lands on; None when it has none."""
    try:
        found = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    if isinstance(found, classmethod | staticmethod):
        return found.__func__
    return found


def _annotated_type(owner_module: types.ModuleType, annotation: Any) -> list[type]:
    """The classes an annotation names (``X``, ``X | None``, ``Annotated[X, ...]``, a
    string of these), resolved in ``owner_module``."""
    if isinstance(annotation, str):
        expr = ast.parse(annotation, mode="eval").body
        return _annotated_type(owner_module, _evaluate(owner_module, expr))
    if isinstance(annotation, type) and annotation is not type(None):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _annotated_type(owner_module, typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [c for a in typing.get_args(annotation) for c in _annotated_type(owner_module, a)]
    return []


def _evaluate(module: types.ModuleType, expr: ast.expr) -> Any:
    """An annotation's expression, evaluated in ``module`` (unions of names kept)."""
    if isinstance(expr, ast.Name):
        return _global(module, expr.id)
    if isinstance(expr, ast.Attribute):
        owner = _evaluate(module, expr.value)
        return getattr(owner, expr.attr, None)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        parts = tuple(p for p in (_evaluate(module, expr.left), _evaluate(module, expr.right)) if p)
        return typing.Union[parts] if parts else None  # noqa: UP007
    if isinstance(expr, ast.Constant) and expr.value is None:
        return type(None)
    if isinstance(expr, ast.Subscript):
        return _evaluate(module, expr.value)  # list[X] -> list: nothing to follow
    return None


def _attribute_type(cls: type, name: str) -> list[type]:
    """The classes of ``cls``'s attribute ``name``, from the class annotations of
    ``cls`` or its bases."""
    for klass in cls.__mro__:
        annotation = vars(klass).get("__annotations__", {}).get(name)
        if annotation is not None:
            return _annotated_type(importlib.import_module(klass.__module__), annotation)
    return []


@dataclass
class _Function:
    """A function of ours being read: its ``ast``, module, and the class ``self`` is."""

    func: Callable[..., Any]
    tree: ast.FunctionDef | ast.AsyncFunctionDef
    module: types.ModuleType
    owner: type | None

    @classmethod
    def of(cls, func: Callable[..., Any]) -> _Function:
        func = inspect.unwrap(func)
        module = inspect.getmodule(func)
        assert module is not None
        tree = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
        assert isinstance(tree, ast.FunctionDef | ast.AsyncFunctionDef)
        tree.decorator_list = []  # how it is registered is not where it goes
        owner = None
        qualname = func.__qualname__.split(".")
        if len(qualname) > 1 and "<locals>" not in qualname:
            owner = getattr(module, qualname[0], None)
        return cls(func, tree, module, owner)

    def parameters(self) -> dict[str, ast.arg]:
        """The parameters of the function and of the functions nested in it."""
        found: dict[str, ast.arg] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    found.setdefault(arg.arg, arg)
                for rest in (args.vararg, args.kwarg):
                    if rest is not None:
                        found.setdefault(rest.arg, rest)
        return found

    def resolve(self, expr: ast.expr) -> list[Any]:
        """What ``expr`` names, as a tool that follows names finds it: functions,
        classes, modules, or instances known by their class; [] when unknown."""
        parameters = self.parameters()
        if isinstance(expr, ast.Name):
            if expr.id == "self" and self.owner is not None:
                return [_Instance(self.owner)]
            if expr.id in parameters:
                annotation = parameters[expr.id].annotation
                if annotation is None:
                    return []
                types_ = _annotated_type(self.module, ast.unparse(annotation))
                return [_Instance(t) for t in types_]
            found = _global(self.module, expr.id)
            return [] if found is None else [found]
        if isinstance(expr, ast.Attribute):
            return [m for owner in self.resolve(expr.value) for m in _member(owner, expr.attr)]
        return []

    def calls(self) -> Iterator[ast.Call]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                yield node

    def calls_a_parameter(self) -> list[str]:
        """The parameters this function calls: callables handed in, which a reader
        cannot follow by name."""
        parameters = self.parameters()
        return [
            ast.unparse(call.func)
            for call in self.calls()
            if isinstance(call.func, ast.Name) and call.func.id in parameters
        ]


def _member(owner: Any, name: str) -> list[Any]:
    """What ``owner.name`` names: a module's attribute (or submodule), a class's own
    member, an instance's method or the class of its annotated attribute."""
    if isinstance(owner, types.ModuleType):
        found = getattr(owner, name, None)
        if found is None:
            try:
                found = importlib.import_module(f"{owner.__name__}.{name}")
            except ImportError:
                return []
        return [found]
    if isinstance(owner, type):
        member = _static_member(owner, name)
        return [] if member is None else [member]
    if isinstance(owner, _Instance):
        member = _static_member(owner.cls, name)
        if inspect.isfunction(member):
            return [member]
        return [_Instance(t) for t in _attribute_type(owner.cls, name)]
    return []


def _ours(func: Any) -> bool:
    return inspect.isfunction(func) and func.__module__.startswith("palimpsest.")


def _module_level(expr: ast.expr, function: _Function) -> list[Callable[..., Any]]:
    """The named function ``expr`` hands to the edge's thread hop: a module-level
    function named directly (``_create``, ``memories.create_memory``), never one
    taken from an argument (``write.perform``)."""
    root = expr
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id in function.parameters() or root.id == "self":
        return []
    return [
        f
        for f in function.resolve(expr)
        if _ours(f) and f.__qualname__ == f.__name__  # not a method, not a closure
    ]


def _trail(start: Callable[..., Any]) -> tuple[dict[Any, Any], dict[Any, list[str]]]:
    """Follow calls by name from ``start``, breadth first, at most :data:`MAX_DEPTH`
    deep; return each function reached with the one it was reached from, and what the
    trail could not follow in the functions read: the parameters they call, and the
    edge's hops they hand no named function."""
    came_from: dict[Any, Any] = {start: None}
    dead_ends: dict[Any, list[str]] = {}
    queue = deque([(start, 0)])
    while queue:
        func, depth = queue.popleft()
        if depth == MAX_DEPTH or not _ours(func) or func.__module__.startswith("palimpsest.domain"):
            continue
        function = _Function.of(func)
        called = function.calls_a_parameter()
        if called:
            dead_ends[func] = called
        for call in function.calls():
            targets = [f for f in function.resolve(call.func) if _ours(f)]
            hops = [f for f in targets if f.__module__ == EDGE]
            if hops:
                targets = [f for arg in call.args for f in _module_level(arg, function)]
                if not targets:  # handed a callable it cannot name: a bound method, a closure
                    dead_ends.setdefault(func, []).append(ast.unparse(call))
            for target in targets:
                if target not in came_from:
                    came_from[target] = func
                    queue.append((target, depth + 1))
    return came_from, dead_ends


def _path(came_from: dict[Any, Any], end: Any) -> list[str]:
    path = []
    while end is not None:
        path.append(f"{end.__module__}.{end.__qualname__}")
        end = came_from[end]
    return path[::-1]


def _reaches(route: Callable[..., Any], command: Callable[..., Any], domain: str) -> None:
    came_from, dead_ends = _trail(route)
    why = "; the trail ends at: " + "; ".join(
        f"{f.__qualname__}: {', '.join(calls)}" for f, calls in dead_ends.items()
    )
    domain_function = _static_member(domain_memory.Memory, domain)
    recorder = _static_member(EventLog, "record")
    assert domain_function in came_from, f"Memory.{domain} is not reached" + why
    assert recorder in came_from, "EventLog.record is not reached" + why
    assert command in came_from, f"{route.__name__} never calls {command.__qualname__}" + why
    command_name = f"{command.__module__}.{command.__qualname__}"
    for end in (domain_function, recorder):
        path = _path(came_from, end)
        # Through the command the route calls (one call into commands/), and by name.
        assert command_name in path, path
        assert len(path) <= MAX_DEPTH + 1


def test_create_memory_follows_by_name_to_the_domain_and_the_recorder() -> None:
    _reaches(_memories.create_memory, memories.create_memory, "create")


def test_create_version_follows_by_name_to_the_domain_and_the_recorder() -> None:
    _reaches(_memories.create_version, memories.revise_memory, "record_version")


@pytest.mark.parametrize("route", [_memories.create_memory, _memories.create_version])
def test_the_memory_routes_leave_the_store_to_the_edge(route: Callable[..., Any]) -> None:
    # The route hands its named write to the edge module's thread hop: it never
    # reaches into the store's datastore or the event log.
    tree = _Function.of(route).tree
    reached = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    assert "datastore" not in reached, "the route reaches the store's datastore"
    assert "log" not in reached, "the route reaches the event log"
