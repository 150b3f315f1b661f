"""How SQL is built: Core statements over the schema's tables, hand-written SQL only
as constant templates (nowhere by formatting a string), and recall's index path
still on the HNSW index."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest
from psycopg import sql

from palimpsest.projections.recall._statements import search_statement, state_statement
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.statement import shaped_sql
from tests.conftest import Tenant

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("domain", "projections", "workers", "api")
_SQL_WORDS = ("SELECT ", "INSERT INTO ", "UPDATE ", "DELETE FROM ", " FROM ", " WHERE ")


def _formatted_sql(path: Path) -> list[str]:
    """Lines of ``path`` that build SQL text by formatting a string."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        text: object
        if isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            text = node.left.value if isinstance(node.left, ast.Constant) else ""
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
        ):
            text = node.func.value.value
        else:
            continue
        # SQL here is spelled in capitals; prose that says "from" is not SQL.
        if isinstance(text, str) and any(word in text for word in _SQL_WORDS):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_nothing_builds_sql_by_formatting_strings(package: str) -> None:
    formatted = [
        line for path in sorted((ROOT / package).rglob("*.py")) for line in _formatted_sql(path)
    ]
    assert formatted == []


def test_recall_filters_are_parameters_and_the_dimension_is_in_the_text() -> None:
    text = shaped_sql(search_statement, "s", 384, False, ("memory_type", "project"))
    # The partial HNSW index's expression and predicate, spelled as the index has them.
    assert "CAST(e.embedding AS VECTOR(384)) <=> CAST(%(q)s AS VECTOR(384))" in text
    assert "e.dimension = 384" in text
    for name in ("model", "memory_type", "project", "limit"):
        assert f"%({name})s" in text
    assert "%(scope)s" not in text
    # The candidates' state: one statement whatever they are (arrays, not a list).
    state = shaped_sql(state_statement, "s")
    for name in ("ids", "digests", "now"):
        assert f"%({name})s" in state
    exact = shaped_sql(search_statement, "s", 384, True, ())
    assert "VECTOR(384))) + 0" in exact


def _plan(runtime: Runtime, tenant: Tenant, *, exact: bool) -> str:
    query = shaped_sql(search_statement, runtime.database.schema, 384, exact, ("scope",))
    params = {
        "q": "[" + ",".join(["0.1"] * 384) + "]",
        "model": "any-model",
        "scope": "user",
        "limit": 40,
        "now": datetime.now(UTC),
    }
    scan = "on" if exact else "off"
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(
            "SELECT set_config('enable_bitmapscan', %s, true),"
            " set_config('enable_seqscan', %s, true), set_config('enable_sort', %s, true)",
            (scan, scan, scan),
        )
        cur.execute(sql.SQL("EXPLAIN {}").format(sql.SQL(query)), params)
        return "\n".join(next(iter(row.values())) for row in cur.fetchall())


def test_the_index_path_of_recall_walks_the_hnsw_index(runtime: Runtime, tenant: Tenant) -> None:
    assert "memory_embeddings_hnsw_384" in _plan(runtime, tenant, exact=False)
    assert "memory_embeddings_hnsw_384" not in _plan(runtime, tenant, exact=True)
