"""Recall's text search keeps its index under row-level security.

The runtime role is subject to forced row-level security, under which PostgreSQL
uses an index only for leakproof operators: ``@@`` is not, so the GIN index of
``memory_texts`` was never used and a text search read every row of the tenant.
The search reads ``memory_lexemes`` (text equality is leakproof) instead; this
plans it as the runtime role over a few thousand memories.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from psycopg import sql

from palimpsest.projections.recall._statements import search_statement
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.statement import shaped_sql
from tests.conftest import Tenant

_MEMORIES = 3000


def _fill(runtime: Runtime, tenant: Tenant) -> None:
    """Give the tenant ``_MEMORIES`` indexed texts, each with a word of its own and
    two words they all share, and let the planner know."""
    schema = runtime.database.schema
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=True) as cur:
        cur.execute(
            sql.SQL(
                "INSERT INTO {s}.memory_texts (memory_id, version_id, content_digest,"
                " revision, memory_type, scope, project, document)"
                " SELECT gen_random_uuid(), gen_random_uuid(), 'd' || i, 1, 'fact', 'user',"
                " NULL, to_tsvector('english', 'ticket PAL-' || i || ' blocks the release')"
                " FROM generate_series(1, %s) AS i"
            ).format(s=sql.Identifier(schema)),
            (_MEMORIES,),
        )
        cur.execute(
            sql.SQL(
                "INSERT INTO {s}.memory_lexemes (lexeme, memory_id, occurrences)"
                " SELECT l.lexeme, t.memory_id, cardinality(l.positions)"
                " FROM {s}.memory_texts t, unnest(t.document) AS l"
            ).format(s=sql.Identifier(schema))
        )
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(
            sql.SQL("ANALYZE {s}.memory_lexemes, {s}.memory_texts").format(s=sql.Identifier(schema))
        )


def _plan(
    runtime: Runtime, tenant: Tenant, dimension: int | None, filtered: tuple[str, ...]
) -> str:
    """EXPLAIN recall's text search for ``PAL-42`` as the runtime role, with the
    planner settings :func:`palimpsest.projections.recall.search.search` gives it."""
    query = shaped_sql(
        search_statement, runtime.database.schema, dimension, False, filtered, False, True
    )
    params = {
        "words": "PAL-42",
        "q": "[" + ",".join(["0.1"] * 384) + "]",
        "model": "any-model",
        "scope": "user",
        "limit": 40,
        "now": datetime.now(UTC),
    }
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(
            "SELECT set_config('enable_bitmapscan', 'on', true),"
            " set_config('enable_seqscan', 'on', true), set_config('enable_sort', 'on', true)"
        )
        cur.execute(
            "SELECT current_user AS role, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        role = cur.fetchone()
        assert (
            role is not None
            and not role["rolbypassrls"]
            and role["role"] == runtime.database.app_user
        )
        cur.execute(sql.SQL("EXPLAIN {}").format(sql.SQL(query)), params)
        return "\n".join(next(iter(row.values())) for row in cur.fetchall())


@pytest.mark.parametrize(
    ("dimension", "filtered"), [(None, ()), (384, ()), (None, ("scope",))], ids=str
)
def test_text_search_uses_the_lexeme_index_under_row_level_security(
    runtime: Runtime, tenant: Tenant, dimension: int | None, filtered: tuple[str, ...]
) -> None:
    _fill(runtime, tenant)
    plan = _plan(runtime, tenant, dimension, filtered)
    assert "memory_lexemes_pkey" in plan, plan
    assert "Seq Scan on memory_lexemes" not in plan, plan
    assert "@@" not in plan, plan
