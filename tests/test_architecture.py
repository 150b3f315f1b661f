"""The house's rules: which room may import which, no circles, complete package faces.

docs/architecture.md draws the rooms; this test keeps that picture true. Every
``import`` counts, including those inside functions and under
``TYPE_CHECKING``: a deferred import is still a dependency a reader must follow.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The rooms, as the one import package names them (palimpsest/ links each room).
PACKAGES = ("palimpsest.domain", "palimpsest.projections", "palimpsest.workers", "palimpsest.api")

# Each room, and the rooms (besides itself) it may import. Rooms are listed
# from the bottom of the house up; a room never imports one that sits above it.
ALLOWED: dict[str, set[str]] = {
    "palimpsest.domain": set(),
    "palimpsest.projections.store": {"palimpsest.domain"},
    "palimpsest.projections.commands": {"palimpsest.domain", "palimpsest.projections.store"},
    "palimpsest.projections.views": {"palimpsest.domain", "palimpsest.projections.store"},
    "palimpsest.projections.recall": {
        "palimpsest.domain",
        "palimpsest.projections.store",
        "palimpsest.projections.views",
    },
    "palimpsest.projections.judgment": {"palimpsest.domain", "palimpsest.projections.store"},
    "palimpsest.projections.drains": {
        "palimpsest.domain",
        "palimpsest.projections.store",
        "palimpsest.projections.commands",
        "palimpsest.projections.views",
        "palimpsest.projections.recall",
        "palimpsest.projections.judgment",
    },
    "palimpsest.projections.history": {
        "palimpsest.domain",
        "palimpsest.projections.store",
        "palimpsest.projections.views",
    },
    "palimpsest.projections.runtime": {
        "palimpsest.domain",
        "palimpsest.projections.store",
        "palimpsest.projections.views",
        "palimpsest.projections.recall",
    },
    "palimpsest.workers": {"palimpsest.domain", "palimpsest.projections"},
    "palimpsest.api": {"palimpsest.domain", "palimpsest.projections"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)  # palimpsest/<room>/...
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted(ROOT.joinpath(*package.split(".")).rglob("*.py")):
            yield _module_name(path), path


def _imports(path: Path) -> set[str]:
    """Every module of ours that ``path`` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # ``from projections.views import beliefs`` imports a module too.
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    known = {name for name, _ in _modules()}
    return {name for name in found if name in known}


def _room(module: str) -> str:
    """The most specific room of ALLOWED that holds ``module``."""
    candidates = [room for room in ALLOWED if module == room or module.startswith(room + ".")]
    if not candidates:
        return ".".join(module.split(".")[:2])
    return max(candidates, key=len)


def _top(module: str) -> str:
    """The room at the top of ``module``: ``palimpsest.api`` for ``palimpsest.api.cli``."""
    return ".".join(module.split(".")[:2])


def _graph() -> dict[str, set[str]]:
    return {name: _imports(path) for name, path in _modules()}


def test_every_module_lives_in_a_room() -> None:
    homeless = [
        name
        for name, _ in _modules()
        if _room(name) not in ALLOWED and name != "palimpsest.projections"
    ]
    assert homeless == []


@pytest.mark.slow
def test_rooms_import_only_the_rooms_below_them() -> None:
    breaches = []
    for module, imported in _graph().items():
        room = _room(module)
        if room not in ALLOWED:
            continue
        for target in imported:
            other = _room(target)
            if other == room or target == "palimpsest.projections":
                continue
            allowed = ALLOWED[room]
            if other not in allowed and not any(other.startswith(a + ".") for a in allowed):
                breaches.append(f"{module} -> {target}")
    assert breaches == []


@pytest.mark.slow
def test_commands_and_views_never_import_each_other() -> None:
    graph = _graph()
    crossing = [
        f"{module} -> {target}"
        for module, imported in graph.items()
        for target in imported
        if {_room(module), _room(target)}
        == {"palimpsest.projections.commands", "palimpsest.projections.views"}
    ]
    assert crossing == []


@pytest.mark.slow
def test_there_are_no_import_circles() -> None:
    graph = _graph()
    # A package imports its own modules to present its face; that is not a circle.
    edges = {
        module: {t for t in targets if not t.startswith(module + ".")}
        for module, targets in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, set()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert circles == []


@pytest.mark.slow
def test_nothing_imports_the_api_or_the_workers_from_below() -> None:
    upward = [
        f"{module} -> {target}"
        for module, imported in _graph().items()
        if _top(module) in ("palimpsest.domain", "palimpsest.projections")
        for target in imported
        if _top(target) in ("palimpsest.api", "palimpsest.workers")
    ]
    assert upward == []


def _private(module: str) -> bool:
    """Whether ``module`` is, or lives inside, an implementation module (``_name``)."""
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def _reaches_inside(module: str, target: str) -> bool:
    """Whether ``module`` imports ``target``, a private module, from outside its room."""
    if not _private(target):
        return False
    if target.startswith("palimpsest.api.client."):
        # The client is a face of its own: users import it with none of the server.
        return not module.startswith("palimpsest.api.client")
    return _room(target) != _room(module)


def test_private_modules_are_imported_only_inside_their_room() -> None:
    # A room's face is its public modules: another room (or a user) may import those
    # and nothing else, so an implementation module can change without an API change.
    breaches = [
        f"{module} -> {target}"
        for module, imported in _graph().items()
        for target in imported
        if _reaches_inside(module, target)
    ]
    assert breaches == []


def test_most_modules_are_private() -> None:
    # What a reader can ignore from outside a room: implementation modules, named so.
    names = [name for name, path in _modules() if path.name != "__init__.py"]
    assert sum(map(_private, names)) >= 120, sum(map(_private, names))


@pytest.mark.parametrize(
    "module_name",
    [name for name, _ in _modules() if name != "palimpsest.workers.boot" and not _private(name)],
)
def test_every_public_module_lists_its_public_names_sorted_in_all(module_name: str) -> None:
    # workers.boot is dramatiq's entry point: importing it connects to a broker.
    # A private module's names are its room's business: it needs no __all__.
    path = dict(_modules())[module_name]
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} has no __all__"
    assert list(exported) == sorted(exported), module_name
    tree = ast.parse(path.read_text())
    public = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    }
    assert public <= set(exported), (module_name, public - set(exported))
    missing = [
        name
        for name in exported
        if not hasattr(module, name) and importlib.util.find_spec(f"{module_name}.{name}") is None
    ]
    assert missing == [], (module_name, missing)


# Packages whose face re-exports names rather than listing their modules.
RE_EXPORTING = {
    "palimpsest.api.cli",
    "palimpsest.api.client",
    "palimpsest.api.schemas",
    "palimpsest.projections.store.migrations",
}
# Modules a package face leaves out on purpose.
UNLISTED = {"palimpsest.workers.boot": "importing it connects to the broker"}


@pytest.mark.parametrize(
    "package",
    [name for name, path in _modules() if path.name == "__init__.py" and name not in RE_EXPORTING],
)
def test_every_room_lists_its_modules_on_its_face(package: str) -> None:
    # A newcomer opens a room's __init__ to see what lives there; a module
    # added without a line on the face is a room they cannot find.
    directory = ROOT.joinpath(*package.split("."))
    modules = {
        path.stem if path.is_file() else path.name
        for path in directory.iterdir()
        if path.stem.isidentifier()  # Alembic's revision files are not modules to import
        and not path.name.startswith("_")
        and (path.suffix == ".py" or (path / "__init__.py").is_file())
    }
    modules -= {name.rsplit(".", 1)[1] for name in UNLISTED if name.startswith(package + ".")}
    face = importlib.import_module(package)
    assert sorted(getattr(face, "__all__", [])) == sorted(modules)
    docstring = face.__doc__ or ""
    unnamed = [name for name in sorted(modules) if f"{package}.{name}`" not in docstring]
    assert unnamed == [], package
