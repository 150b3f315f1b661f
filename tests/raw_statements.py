"""Every raw SQL statement written in the package's source, found and rendered for PostgreSQL.

An AST walk over the package's modules finds string expressions (constants,
f-strings, concatenations, ``psycopg.sql`` compositions) that start with an SQL
keyword. Each is rendered as the code renders it: names the walk can read
(module constants, ``sql.SQL(...).format(...)`` of such names) are read from the
imported module, ``{schema}`` and the other names ``schema_sql`` fills in are
filled in for the test database, and psycopg's ``%s``/``%(name)s`` (or
SQLAlchemy's ``:name``) placeholders become ``$n`` parameters, so that
PostgreSQL can ``PREPARE`` the statement. What the walk cannot render is kept
with the reason, for the test to hold against its explicit list.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import string
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from psycopg import sql

from palimpsest.projections.store.schema import EMBEDDINGS_TABLE, EVENTS_TABLE, SNAPSHOTS_TABLE
from palimpsest.projections.store.sql import WRITE_POSITION_SETTING

__all__ = ["PACKAGE_ROOT", "Statement", "find_statements", "render_placeholders"]

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "palimpsest"

_KEYWORDS = (
    "SELECT|INSERT|UPDATE|DELETE|WITH|VALUES|MERGE|TABLE|CREATE|ALTER|DROP|SET|RESET|LISTEN"
    "|UNLISTEN|NOTIFY|LOCK|TRUNCATE|COPY|GRANT|REVOKE|COMMENT|REINDEX|VACUUM|ANALYZE|EXPLAIN"
    "|CALL|DO|DISCARD|REFRESH"
)
# A keyword alone ("DELETE") is an HTTP method, not a statement.
_KEYWORD = re.compile(rf"\s*\(?\s*({_KEYWORDS})(\s|\()")
_QUOTED_KEYWORD = re.compile(rf"[\"']\s*\(?\s*(?:{_KEYWORDS})\b")
"""A module with no literal that starts with a keyword is not parsed."""
_PREPARABLE = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "MERGE", "TABLE"}
)
_COMPOSERS = (sql.SQL, sql.Identifier, sql.Literal, sql.Composed)
_METHODS = frozenset({"format", "join", "encode", "as_string", "as_bytes"})
_TEMPLATE_CALLS = frozenset({"schema_sql", "schema_query", "_table_query"})
_TEXT_CALLS = frozenset({"text"})
_SCHEMA = "<schema>"


@dataclass(frozen=True)
class Statement:
    """One raw statement of the package: where it is written, and what PostgreSQL gets."""

    path: str
    """The module's path under ``palimpsest/`` (``projections/store/eventlog.py``)."""
    line: int
    head: str
    """The statement's first literal text as written (what the explicit list names)."""
    keyword: str
    sql: str | None
    """The statement with ``$n`` parameters; None when the walk could not render it."""
    why_not: str = ""

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def preparable(self) -> bool:
        """Whether ``PREPARE`` takes it (utility statements are run instead)."""
        return self.keyword in _PREPARABLE


class _UnresolvedError(Exception):
    """Raised when an expression names something only known at run time."""


def _names(schema: str) -> dict[str, sql.Composable]:
    """What ``schema_sql`` fills in (and ``{table}``, the events or snapshots table
    of ``eventlog``'s own templates: the two share their columns)."""
    return {
        "schema": sql.Identifier(schema),
        "events": sql.Identifier(EVENTS_TABLE),
        "snapshots": sql.Identifier(SNAPSHOTS_TABLE),
        "embeddings": sql.Identifier(EMBEDDINGS_TABLE),
        "table": sql.Identifier(EVENTS_TABLE),
        "position": sql.SQL(f"current_setting('{WRITE_POSITION_SETTING}')::bigint"),
    }


def _evaluate(node: ast.expr, env: dict[str, Any]) -> Any:
    """Evaluate a string expression from names in ``env``, calling nothing but
    psycopg's composition and string methods."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _UnresolvedError(node.id)
        return env[node.id]
    if isinstance(node, ast.Attribute):
        if node.attr == "schema" and _SCHEMA in env:
            # ``database.schema``, ``log.datastore.schema``: the store's schema.
            return env[_SCHEMA]
        value = _evaluate(node.value, env)
        if not (isinstance(value, ModuleType) or node.attr in _METHODS):
            raise _UnresolvedError(ast.unparse(node))
        return getattr(value, node.attr)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _evaluate(node.left, env) + _evaluate(node.right, env)
    if isinstance(node, ast.JoinedStr):
        return "".join(_evaluate_part(part, env) for part in node.values)
    if isinstance(node, ast.Subscript):
        return _evaluate(node.value, env)[_evaluate(node.slice, env)]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_evaluate(element, env) for element in node.elts]
    if isinstance(node, ast.Call):
        function = _evaluate(node.func, env)
        if not (function in _COMPOSERS or getattr(function, "__name__", "") in _METHODS):
            raise _UnresolvedError(ast.unparse(node.func))
        args = [_evaluate(arg, env) for arg in node.args]
        kwargs = {str(k.arg): _evaluate(k.value, env) for k in node.keywords}
        return function(*args, **kwargs)
    raise _UnresolvedError(ast.unparse(node))


def _evaluate_part(part: ast.expr, env: dict[str, Any]) -> str:
    if isinstance(part, ast.FormattedValue):
        spec = "" if part.format_spec is None else _evaluate(part.format_spec, env)
        return format(_evaluate(part.value, env), spec)
    return str(_evaluate(part, env))


def _head(node: ast.expr) -> str | None:
    """The expression's leading literal text, if it has one."""
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        node = node.left
    if isinstance(node, ast.JoinedStr) and node.values:
        node = node.values[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        value = node.value
        return value.decode() if isinstance(value, bytes) else value
    return None


def _called(node: ast.AST | None) -> str:
    """The last name of a call's function (``sql.SQL`` → ``SQL``)."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return ""


def _is_string(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_string(node.left) or _is_string(node.right)
    return isinstance(node, ast.JoinedStr)


def _candidates(tree: ast.Module) -> list[tuple[ast.expr, list[ast.AST]]]:
    """Maximal string expressions that start with an SQL keyword, each with its
    ancestors (nearest first)."""
    found: list[tuple[ast.expr, list[ast.AST]]] = []

    def visit(node: ast.AST, ancestors: list[ast.AST]) -> None:
        parent = ancestors[0] if ancestors else None
        if (
            isinstance(node, ast.expr)
            and _is_string(node)
            and not (isinstance(parent, ast.BinOp) and _is_string(parent))
            and not isinstance(parent, (ast.Expr, ast.JoinedStr, ast.Compare))
            and _called(parent) not in {"startswith", "endswith"}
        ):
            head = _head(node)
            if head is not None and _KEYWORD.match(head):
                found.append((node, ancestors))
                return
        for child in ast.iter_child_nodes(node):
            visit(child, [node, *ancestors])

    visit(tree, [])
    return found


def _module_constant(module: ModuleType, ancestors: list[ast.AST]) -> Any:
    """The value of the module-level name whose assignment holds the expression."""
    top = ancestors[-2] if len(ancestors) >= 2 else None
    if isinstance(top, ast.Assign) and len(top.targets) == 1:
        target: ast.expr | None = top.targets[0]
    elif isinstance(top, ast.AnnAssign):
        target = top.target
    else:
        return None
    if isinstance(target, ast.Name):
        return getattr(module, target.id, None)
    return None


def _composes_text(node: ast.AST, env: dict[str, Any]) -> bool:
    """Whether ``node`` calls, with one argument, a function from ``LiteralString`` to
    ``LiteralString`` (composing text, nothing else)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return False
    try:
        function = _evaluate(node.func, env)
    except _UnresolvedError:
        return False
    if not inspect.isfunction(function):
        return False
    annotations = function.__annotations__
    return "return" in annotations and set(annotations.values()) == {"LiteralString"}


def _fields(text: str) -> set[str] | None:
    """The replacement fields of ``text`` as a ``str.format`` template (None: it is not one)."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError:
        return None


_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)[sbt]|%[sbt]")
_TEXT_PLACEHOLDER = re.compile(r"(?<![:\w]):(\w+)")


def render_placeholders(text: str, *, sqlalchemy: bool = False) -> str:
    """Replace psycopg's placeholders (or SQLAlchemy ``text``'s) with ``$n``; a name used
    twice is one parameter."""
    numbers: dict[str, int] = {}

    def number(name: str | None) -> str:
        key = name if name is not None else f"#{len(numbers)}"
        return f"${numbers.setdefault(key, len(numbers) + 1)}"

    if sqlalchemy:
        return _TEXT_PLACEHOLDER.sub(lambda m: number(m.group(1)), text)
    return _PLACEHOLDER.sub(lambda m: "%" if m.group(0) == "%%" else number(m.group(1)), text)


def _render(
    node: ast.expr, ancestors: list[ast.AST], module: ModuleType, schema: str
) -> tuple[str | None, str]:
    """The statement as PostgreSQL gets it, or None and why the walk cannot tell."""
    env = vars(module)
    try:
        value = _evaluate(node, env)
    except _UnresolvedError as e:
        value = _module_constant(module, ancestors)
        if value is None:
            return None, f"assembled at run time (from {e})"
    if isinstance(value, bytes):
        value = value.decode()
    if not isinstance(value, str):
        return None, f"not text: {type(value).__name__}"
    while ancestors and _composes_text(ancestors[0], env):
        # ``counting(...)``: a package function from text to text, called as written.
        call = ancestors[0]
        assert isinstance(call, ast.Call)
        value = _evaluate(call.func, env)(value)
        ancestors = ancestors[1:]
    parent = ancestors[0] if ancestors else None
    if _called(parent) == "SQL" and len(ancestors) >= 3 and _called(ancestors[2]) == "format":
        # The composition as the code writes it, with the names a store function
        # takes bound for the test database.
        local = {**env, "schema": schema, _SCHEMA: schema, "table": EVENTS_TABLE}
        try:
            composed = _evaluate(ancestors[2], local)  # type: ignore[arg-type]
            return render_placeholders(composed.as_string(None)), ""
        except (_UnresolvedError, KeyError, IndexError, TypeError):
            pass
    fields = _fields(value)
    template = _called(parent) in _TEMPLATE_CALLS | {"SQL"} or bool(fields)
    if template and fields is not None:
        names = _names(schema)
        unknown = sorted(f or "{}" for f in fields if f not in names)
        if unknown:
            return None, f"fields filled at run time: {', '.join(unknown)}"
        value = sql.SQL(value).format(**names).as_string(None)
    return render_placeholders(value, sqlalchemy=_called(parent) in _TEXT_CALLS), ""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> list[Path]:
    # The rooms are symlinks under palimpsest/: walked by their package paths.
    return sorted(
        Path(folder, name)
        for folder, children, names in os.walk(PACKAGE_ROOT, followlinks=True)
        for name in names
        if name.endswith(".py") and Path(folder).name != "versions"
    )


def find_statements(schema: str) -> list[Statement]:
    """Every raw statement in the package (migration revisions aside: each runs
    against the schema of its own revision), rendered for ``schema``."""
    statements: list[Statement] = []
    for path in _modules():
        source = path.read_text()
        if not _QUOTED_KEYWORD.search(source):
            continue
        tree = ast.parse(source, str(path))
        found = _candidates(tree)
        if not found:
            continue
        module = importlib.import_module(_module_name(path))
        for node, ancestors in found:
            head = _head(node) or ""
            keyword = _KEYWORD.match(head)
            rendered, why_not = _render(node, ancestors, module, schema)
            statements.append(
                Statement(
                    path=str(path.relative_to(PACKAGE_ROOT)),
                    line=node.lineno,
                    head=head.strip(),
                    keyword=keyword.group(1) if keyword else "",
                    sql=rendered,
                    why_not=why_not,
                )
            )
    return statements
