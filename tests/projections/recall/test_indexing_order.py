"""The indexing drain's order: a backlog oldest first, and in every batch the newest
writes, which an agent recalls next."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.recall.indexing import NEWEST_SHARE, index_pending
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant, drain_until_caught_up, fact_spec, library_writer, owner_rows


def _created(body: dict[str, Any]) -> list[UUID]:
    """The memories a write created, in order (a batch's results, or the one)."""
    return [UUID(item["id"]) for item in body.get("results", [body])]


def _unindexed(runtime: Runtime, tenant: Tenant) -> set[UUID]:
    query = "SELECT memory_id FROM {schema}.revisions WHERE tenant_id = %s AND indexed < published"
    return {row[0] for row in owner_rows(runtime, query, tenant.id)}


def test_a_write_made_during_an_import_is_indexed_with_the_next_batch(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given an import in two writes of 20 notes, then a preference, all published and
    # none indexed
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    first, second = (
        set(
            _created(
                writer.write(
                    caller,
                    [fact_spec(f"Imported note {part}-{n} of the archive") for n in range(20)],
                    batch=True,
                ).body
            )
        )
        for part in ("a", "b")
    )
    [preference] = _created(
        writer.write(caller, [fact_spec("Now prefers tea to coffee")], batch=False).body
    )
    drain_until_caught_up(runtime)
    assert _unindexed(runtime, tenant) == first | second | {preference}
    # When the indexing drain takes one batch of 8
    done = index_pending(runtime.log, runtime.embedder, limit=8, tenants=lambda: [tenant.id])
    # Then the preference is in it (a recall finds it now), with the import's oldest
    assert done.embedded == 8
    indexed = (first | second | {preference}) - _unindexed(runtime, tenant)
    newest = 8 // NEWEST_SHARE
    assert preference in indexed
    assert len(indexed & first) == 8 - newest
    assert len(indexed & second) == newest - 1
