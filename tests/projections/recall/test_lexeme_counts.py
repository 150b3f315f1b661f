"""Recall by words knows which words are common, and a common word costs no matching.

``lexeme_counts`` is written by the same statements that write ``memory_lexemes``:
the indexing drain (a new memory, a new version with other words) and erasure. The
counts must equal the rows after any of them, or text search would leave out a
rare word, or keep a common one; and a word no memory holds any more has no row (its
key is the word: an erased memory's words must not stay). A query's common words
(held by more than 1% of a tenant's memories, and by more than 1,000) select no
candidates but still rank them; its rarest word always selects.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from fastapi.testclient import TestClient
from psycopg import sql
from sqlalchemy import select

from palimpsest.projections.recall._words import (
    COMMON_FLOOR,
    EVERY_WORD,
    query_words,
    text_candidates,
)
from palimpsest.projections.recall.indexing import _write_texts
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.sql import compile_query, tables_in
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up


def _counts(runtime: Runtime, tenant: Tenant) -> tuple[dict[str, int], dict[str, int]]:
    """Return the tenant's ``lexeme_counts`` (every row: a count of zero is a word kept
    for nothing) and the same counted from its rows."""
    schema = sql.Identifier(runtime.database.schema)
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(sql.SQL("SELECT lexeme, memories FROM {s}.lexeme_counts").format(s=schema))
        kept = {row["lexeme"]: row["memories"] for row in cur.fetchall()}
        cur.execute(
            sql.SQL(
                "SELECT lexeme, count(*) AS n FROM {s}.memory_lexemes GROUP BY lexeme"
                " UNION ALL SELECT '', count(DISTINCT memory_id) FROM {s}.memory_lexemes"
                " HAVING count(*) > 0"
            ).format(s=schema)
        )
        counted = {row["lexeme"]: row["n"] for row in cur.fetchall()}
    return kept, counted


def test_counts_follow_new_memories_new_versions_and_erasure(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    ids = [
        remember(client, headers, type="fact", content=text)["id"]
        for text in (
            "Ticket PAL-7 blocks the Zephyr release",
            "Ticket PAL-8 blocks the migration",
            "The release train leaves on Friday",
        )
    ]
    index_until_caught_up(runtime, tenant.id)
    kept, counted = _counts(runtime, tenant)
    assert kept == counted and kept["releas"] == 2 and kept["ticket"] == 2 and kept[""] == 3
    # A new version with other words: its old words are uncounted, its new ones counted.
    revised = post(
        client,
        f"/v1/memories/{ids[0]}/versions",
        {"content": "Ticket PAL-7 was closed on Monday"},
        headers,
    )
    assert revised.status_code == 201, revised.text
    index_until_caught_up(runtime, tenant.id)
    kept, counted = _counts(runtime, tenant)
    assert kept == counted and kept["releas"] == 1 and kept["monday"] == 1 and kept[""] == 3
    assert "zephyr" not in kept, "a word no memory holds any more has no row"
    # Erasure deletes the words in the erasing transaction, and their counts with them.
    erased = post(
        client, "/v1/erasures", {"reason": "the user asked", "memory_ids": [ids[1]]}, headers
    )
    assert erased.status_code in (200, 201), erased.text
    kept, counted = _counts(runtime, tenant)
    assert kept == counted and "migrat" not in kept and kept["ticket"] == 1 and kept[""] == 2


_MEMORIES = COMMON_FLOOR + 200


def _fill(runtime: Runtime, tenant: Tenant) -> dict[int, UUID]:
    """Index ``_MEMORIES`` texts through the indexing drain's own writer: every one
    holds "ticket", "blocks" and "release" (common), and a number of its own."""
    ids = {i: uuid4() for i in range(_MEMORIES)}
    rows = [
        {
            "memory_id": memory_id,
            "current_version_id": uuid4(),
            "content_digest": f"d{i}",
            "requested": 1,
            "memory_type": "fact",
            "scope": "user",
            "project": None,
        }
        for i, memory_id in ids.items()
    ]
    texts = {memory_id: f"ticket PAL-{i} blocks the release" for i, memory_id in ids.items()}
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=True) as cur:
        _write_texts(cur, runtime.database.schema, rows, texts)
    return ids


def _text_search(runtime: Runtime, tenant: Tenant, words: str) -> list[dict[str, Any]]:
    """The text search's candidates of ``words``, best first (before recall joins them
    to the memories' state, which these have not)."""
    tables = tables_in(runtime.database.schema)
    near = text_candidates(tables["memory_texts"].alias("e"), tables, [], None)
    statement = select(near.c.memory_id, near.c.text_score).order_by(
        near.c.text_score.desc(), near.c.memory_id
    )
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(compile_query(statement)[0], {"words": words, "limit": 40})
        return list(cur.fetchall())


def test_a_common_word_selects_nothing_but_ranks_and_the_rarest_always_selects(
    runtime: Runtime, tenant: Tenant
) -> None:
    ids = _fill(runtime, tenant)
    found = _text_search(runtime, tenant, "release PAL-42")
    # Only the memory holding the rare words is a candidate: the thousand-odd holding
    # "release" are not matched (nor grouped, nor ranked).
    assert [r["memory_id"] for r in found] == [ids[42]]
    # It holds every word of the query, the common one included.
    assert found[0]["text_score"] >= EVERY_WORD
    # A query of common words only still finds (its rarest word selects).
    common = _text_search(runtime, tenant, "release blocks")
    assert len(common) == 40 and all(r["text_score"] >= EVERY_WORD for r in common)


def _words(
    runtime: Runtime, tenant: Tenant, counts: dict[str, int], words: str
) -> tuple[list[str], list[str], int]:
    """The query's kept and common lexemes in a tenant whose ``lexeme_counts`` are
    ``counts`` (the counts alone decide: no memory holds the words)."""
    schema = sql.Identifier(runtime.database.schema)
    tables = tables_in(runtime.database.schema)
    statement = select(query_words(tables))
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=True) as cur:
        for lexeme, memories in counts.items():
            cur.execute(
                sql.SQL(
                    "INSERT INTO {s}.lexeme_counts (lexeme, memories) VALUES (%s, %s)"
                    " ON CONFLICT (tenant_id, lexeme) DO UPDATE SET memories = excluded.memories"
                ).format(s=schema),
                (lexeme, memories),
            )
        cur.execute(compile_query(statement)[0], {"words": words})
        row = cur.fetchone()
    assert row is not None
    return sorted(row["kept"] or []), sorted(row["common"] or []), int(row["total"])


def test_a_word_held_by_more_than_one_percent_of_a_large_tenant_is_common(
    runtime: Runtime, tenant: Tenant
) -> None:
    counts = {"": 100_000, "releas": 2_000, "ticket": 900, "pal": 3, "-42": 1}
    # 2,000 of 100,000 is above 1% (and above the floor): it selects nothing.
    kept, common, total = _words(runtime, tenant, counts, "release ticket PAL-42")
    assert (kept, common, total) == (["-42", "pal", "ticket"], ["releas"], 4)
    # The share grows with the tenant: 2,000 of 400,000 (0.5%) is not common.
    kept, _, _ = _words(runtime, tenant, {**counts, "": 400_000}, "release ticket PAL-42")
    assert kept == ["-42", "pal", "releas", "ticket"]
