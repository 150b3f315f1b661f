"""Every raw SQL statement of the package meets the migrated schema: an unknown table or
column fails here, not at run time.

``tests/raw_statements.py`` finds and renders each statement; this asks the
test database to ``PREPARE`` it (parse analysis resolves every table, column,
function and operator, and infers the parameters' types) inside a savepoint
that is rolled back. Utility statements, which ``PREPARE`` refuses, are run in
the rolled-back savepoint instead (``SET TRANSACTION`` first in a transaction of
its own). What the walk cannot render is excused only by :data:`UNRENDERED`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import errors, sql

from tests.raw_statements import Statement, find_statements

if TYPE_CHECKING:
    from palimpsest.projections.runtime import Runtime

UNRENDERED: dict[tuple[str, str], str] = {
    ("history/rebuild.py", ""): (
        "the shadow-table rebuild names its tables at run time (one per read model) and is"
        " mostly DDL on them; tests/projections/history run it"
    ),
    ("store/migrations/_ddl.py", ""): (
        "row-level security DDL the revisions run per table, against their own revision's schema"
    ),
    ("store/schema.py", "CREATE INDEX IF NOT EXISTS {name}"): (
        "DDL: the HNSW index of one embedding dimension, created at run time"
    ),
    ("store/database.py", "CREATE DATABASE {}"): "DDL: the embedded server's database",
    ("drains/loop.py", "LISTEN {}"): "utility statement on a channel named per schema",
    ("views/publications.py", "LISTEN {}"): "utility statement on a channel named per schema",
    ("history/_replay_workers.py", "SET TRANSACTION SNAPSHOT {}"): (
        "utility statement naming a snapshot exported at run time"
    ),
    ("history/verify.py", "SELECT {} FROM {}.{} WHERE tenant_id"): (
        "reads each read model's columns as its table spec lists them"
    ),
    ("recall/_conflict_marks.py", "SELECT a.memory_id AS a_id"): (
        "the vector dimension and the exact plan are composed in per call"
    ),
    ("store/_recorder.py", "SELECT set_config('palimpsest.tenant_id', %s, true),"): (
        "the lock timeout and the recorder's channel are literals composed in per recorder"
    ),
    ("store/sql.py", "WITH"): "Chain joins statements written (and checked) elsewhere",
    ("store/tenancy.py", "SELECT"): (
        "set_config calls chosen per transaction's flags, each written (and checked) beside it"
    ),
}
"""Statements the walk cannot render, by (module path under the rooms, the
statement's first literal text; "" for every such statement of the module), with why."""


def _listed(statement: Statement) -> tuple[str, str] | None:
    path = statement.path.removeprefix("projections/")
    for module, head in UNRENDERED:
        if path == module and statement.head.startswith(head):
            return module, head
    return None


@pytest.fixture(scope="module")
def statements(runtime: Runtime) -> list[Statement]:
    return find_statements(runtime.database.schema)


def _indeterminate(error: psycopg.Error) -> int | None:
    """The parameter whose type PostgreSQL could not infer (``$n``), if that was the error."""
    if not isinstance(error, errors.IndeterminateDatatype):
        return None
    found = re.search(r"\$(\d+)", str(error))
    return int(found.group(1)) if found else None


_GUESSES = ("integer", "bigint", "double precision", "timestamptz", "boolean", "uuid")
"""Types a parameter may be declared when PostgreSQL's guess for an untyped one (text)
finds no function: psycopg sends ints, floats, datetimes, bools and UUIDs typed."""


def _prepare(cur: psycopg.Cursor[Any], name: str, statement: str) -> None:
    """PREPARE ``statement``, its parameters typed as PostgreSQL infers them. Where it
    cannot (``SELECT %s``), or its guess of text finds no function or operator for them
    (``make_interval(hours => CASE ... %s ...)``), a parameter is declared as psycopg
    would send a value, one guess at a time; a misspelt function fails every guess."""
    try:
        _prepare_declared(cur, name, statement, {})
    except errors.UndefinedFunction:
        for parameter in range(1, len(set(re.findall(r"\$(\d+)", statement))) + 1):
            for guess in _GUESSES:
                try:
                    _prepare_declared(cur, name, statement, {parameter: guess})
                    return
                except errors.UndefinedFunction:
                    continue
                except psycopg.Error:
                    break
        raise


def _prepare_declared(
    cur: psycopg.Cursor[Any], name: str, statement: str, declared: dict[int, str]
) -> None:
    declared = dict(declared)
    while True:
        types: sql.Composable = sql.SQL("")
        if declared:
            listed = [sql.SQL(declared.get(n, "unknown")) for n in range(1, max(declared) + 1)]
            types = sql.SQL("({})").format(sql.SQL(", ").join(listed))
        cur.execute("SAVEPOINT raw_sql")
        try:
            cur.execute(
                sql.SQL("PREPARE {} {} AS {}").format(
                    sql.Identifier(name), types, sql.SQL(statement)
                )
            )
            return
        except psycopg.Error as e:
            parameter = _indeterminate(e)
            if parameter is None or parameter in declared:
                raise
            declared[parameter] = "text"
        finally:
            cur.execute("ROLLBACK TO SAVEPOINT raw_sql")


def _run_utility(conn: psycopg.Connection[Any], statement: str) -> None:
    """Run a utility statement where its effect is rolled back."""
    with conn.cursor() as cur:
        if statement.lstrip().startswith("SET TRANSACTION"):
            conn.rollback()  # it must be the transaction's first statement
            cur.execute(statement)
            conn.rollback()
            return
        cur.execute("SAVEPOINT raw_sql")
        try:
            cur.execute(statement)
        finally:
            cur.execute("ROLLBACK TO SAVEPOINT raw_sql")


def check(runtime: Runtime, statements: list[Statement]) -> list[str]:
    """Return ``module:line: error`` for each rendered statement the database refuses."""
    refused: list[str] = []
    with runtime.database.owner_connection() as conn:
        for number, statement in enumerate(s for s in statements if s.sql is not None):
            assert statement.sql is not None
            try:
                if statement.preparable:
                    with conn.cursor() as cur:
                        _prepare(cur, f"raw_sql_{number}", statement.sql)
                else:
                    _run_utility(conn, statement.sql)
            except psycopg.Error as e:
                conn.rollback()
                first = str(e).strip().splitlines()[0]
                refused.append(f"{statement.where}: {type(e).__name__}: {first}")
        conn.rollback()
    return refused


def test_every_rendered_statement_meets_the_migrated_schema(
    runtime: Runtime, statements: list[Statement]
) -> None:
    assert check(runtime, statements) == []


def test_only_listed_statements_go_unrendered(statements: list[Statement]) -> None:
    unlisted = [
        f"{s.where}: {s.why_not}: {s.head[:60]!r}"
        for s in statements
        if s.sql is None and _listed(s) is None
    ]
    assert unlisted == []


def test_every_listed_statement_still_exists(statements: list[Statement]) -> None:
    used = {_listed(s) for s in statements if s.sql is None}
    assert sorted(set(UNRENDERED) - used) == []


def test_the_walk_finds_the_package_statements(statements: list[Statement]) -> None:
    # The events insert, written as a module constant and composed per table, is found
    # and rendered: a walk that found nothing would pass the tests above.
    rendered = [s.sql for s in statements if s.sql is not None]
    assert len(rendered) > 150
    assert any(
        s.startswith("INSERT INTO ") and "(originator_id, originator_version, topic, state)" in s
        for s in rendered
    )


def test_a_misspelt_column_is_refused_with_its_place(
    runtime: Runtime, statements: list[Statement]
) -> None:
    # Given a real statement of the package with one column misspelt
    statement = next(
        s for s in statements if s.sql is not None and s.preparable and " requested" in s.sql
    )
    assert statement.sql is not None
    misspelt = Statement(
        statement.path,
        statement.line,
        statement.head,
        statement.keyword,
        statement.sql.replace(" requested", " requestedd", 1),
    )
    # When it is checked, then the database refuses it, naming its module and line
    [refusal] = check(runtime, [misspelt])
    assert refusal.startswith(f"{statement.where}: UndefinedColumn:")
