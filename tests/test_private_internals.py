"""Other libraries' private internals are reached only from their adapter modules.

The source rooms (``domain/ projections/ workers/ api/``) are read as Python
syntax for what reaches under the public API of FastAPI, Starlette, uvicorn,
psycopg or eventsourcing: an imported ``_name`` or ``_module``; an internal class or
function imported by name (psycopg's ``Transformer``, uvicorn's protocols and
server state); ``._name`` on anything imported from those libraries; a
connection's ``.lock`` or ``.pgconn``; a subclass of one of their classes that
overrides or calls a private method of it. Each such use is allowed only in an
adapter module of :data:`ADAPTERS`, whose contract test must exist and whose
docstring says what it uses, why, and what breaks.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("domain", "projections", "workers", "api")
LIBRARIES = ("fastapi", "starlette", "uvicorn", "psycopg", "psycopg_pool", "eventsourcing")

ADAPTERS: dict[str, str] = {
    "api/_fastapi_internals.py": "tests/contracts/test_fastapi_internals.py",
    "projections/store/_psycopg_internals.py": "tests/contracts/test_psycopg_internals.py",
}
"""Each module allowed to reach a library's internals, with its contract test."""

INTERNAL_MODULES = ("uvicorn.protocols", "uvicorn.server", "uvicorn.lifespan", "uvicorn.loops")
"""Modules with no underscore whose contents are internal all the same."""
INTERNAL_NAMES = {
    ("psycopg.adapt", "Transformer"),
    ("psycopg.errors", "error_from_result"),
    ("psycopg.pq", "PGconn"),
}
"""Names public modules export that are internal all the same."""
CONNECTION_INTERNALS = ("lock", "pgconn")
"""Attributes of a psycopg connection used under its public API (``pgconn`` is
documented, but it hands the connection's libpq handle to code psycopg does not
know of)."""


def _library(module: str) -> bool:
    return module.split(".", maxsplit=1)[0] in LIBRARIES


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _internal_module(module: str) -> bool:
    return any(_private(p) for p in module.split(".")) or module.startswith(INTERNAL_MODULES)


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def internals_in(source: str) -> Iterator[tuple[int, str]]:  # noqa: PLR0912
    """Yield each reach under a library's public API in ``source``: its line and what."""
    tree = ast.parse(source)
    imported: dict[str, str] = {}  # local name -> the library's dotted name
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _library(alias.name):
                    imported[(alias.asname or alias.name).split(".")[0]] = alias.name.split(".")[0]
                    if _internal_module(alias.name):
                        yield node.lineno, f"imports {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and _library(node.module):
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                if (
                    _internal_module(node.module)
                    or _private(alias.name)
                    or (node.module, alias.name) in INTERNAL_NAMES
                ):
                    yield node.lineno, f"imports {alias.name} from {node.module}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            root = _root(node)
            if root in imported and _private(node.attr):
                yield node.lineno, f"reads {ast.unparse(node)}"
            dotted = _dotted(node)
            if root in imported and dotted is not None:
                full = imported[root] + dotted[len(root) :]
                module, _, name = full.rpartition(".")
                if (module, name) in INTERNAL_NAMES or _internal_module(module):
                    yield node.lineno, f"reads {full}"
            if node.attr in CONNECTION_INTERNALS and "conn" in ast.unparse(node.value).lower():
                yield node.lineno, f"reads {ast.unparse(node)}"
        elif isinstance(node, ast.ClassDef):
            yield from _private_overrides(node, imported)


def _private_overrides(node: ast.ClassDef, imported: dict[str, str]) -> Iterator[tuple[int, str]]:
    """Yield the private methods of a library class that ``node``, its subclass,
    defines or calls through ``super()``."""
    bases = []
    for base in node.bases:
        dotted, root = _dotted(base), _root(base)
        if dotted is None or root not in imported:
            continue
        module, _, name = (imported[root] + dotted[len(root) :]).rpartition(".")
        try:
            bases.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    if not bases:
        return
    for item in ast.walk(node):
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name):
            if any(hasattr(base, item.name) for base in bases):
                yield item.lineno, f"{node.name} overrides {item.name}"
        elif (
            isinstance(item, ast.Attribute)
            and _private(item.attr)
            and isinstance(item.value, ast.Call)
            and ast.unparse(item.value.func) == "super"
        ):
            yield item.lineno, f"{node.name} calls super().{item.attr}"


def _room_sources() -> list[Path]:
    return sorted(
        path
        for room in ROOMS
        for path in ROOT.joinpath(room).rglob("*.py")
        if "migrations" not in path.parts
    )


def test_only_the_adapters_reach_under_a_librarys_public_api() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in _room_sources()
        if str(path.relative_to(ROOT)) not in ADAPTERS
        for line, what in internals_in(path.read_text())
    }
    assert not found, "put these in an adapter module (see ADAPTERS):\n" + "\n".join(sorted(found))


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_each_adapter_reaches_an_internal_and_has_its_contract_test(adapter: str) -> None:
    path = ROOT / adapter
    assert path.exists(), f"{adapter} is gone: take it out of ADAPTERS"
    assert list(internals_in(path.read_text())), f"{adapter} uses no internal: not an adapter"
    contract = ADAPTERS[adapter]
    assert (ROOT / contract).exists(), f"{adapter}'s contract test {contract} is missing"
    assert path.name.startswith("_"), f"{adapter}: an adapter is private to its room"
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    for says in ("What it uses", "Why", "What breaks"):
        assert says in docstring, f"{adapter}'s docstring does not say {says!r}"


def test_the_scan_finds_each_kind_of_reach() -> None:
    planted = """
import psycopg
import fastapi.routing
from fastapi.routing import _effective_route_context_var
from psycopg.adapt import Transformer
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from eventsourcing.postgres import PostgresApplicationRecorder

def f(conn, app):
    conn.pgconn.flush()
    with conn.lock:
        pass
    psycopg._encodings.conn_encoding(conn)
    return fastapi.routing._effective_route_context_var.get()

class Protocol(HttpToolsProtocol):
    pass

class Recorder(PostgresApplicationRecorder):
    def _insert_events(self, c, events, **kwargs):
        return super()._insert_events(c, events, **kwargs)
"""
    found = {what for _, what in internals_in(planted)}
    assert found >= {
        "imports _effective_route_context_var from fastapi.routing",
        "imports Transformer from psycopg.adapt",
        "imports HttpToolsProtocol from uvicorn.protocols.http.httptools_impl",
        "reads conn.pgconn",
        "reads conn.lock",
        "reads psycopg._encodings",
        "reads fastapi.routing._effective_route_context_var",
        "Recorder overrides _insert_events",
        "Recorder calls super()._insert_events",
    }, found
    assert not list(internals_in("from psycopg import sql\nclass A:\n    lock = None\n"))
