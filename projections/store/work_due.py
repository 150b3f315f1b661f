"""Which tenants have background work due, so a sweep reads only those tenants.

A sweep that asked every tenant for its work cost O(tenants) even when the
store was idle. Instead, the write (or publish) that makes work marks its
tenant in a row of ids, times and positions only (``revision_tenants``,
``tenant_work``, ``index_tenants``: no tenant data, no row-level security),
and a drain lists the tenants marked since they were last found clean, one
index lookup whatever the number of tenants.

A kind of work is due while its ``marked`` is above its ``done``. A drain
reads ``marked`` first (``seen``), then looks for work; if it finds none,
it raises ``done`` to ``seen``. A mark that commits after the drain read
``seen`` is larger (write positions follow commit order; publishes count
up under the row's lock), so the tenant stays due: no mark is ever lost.
Expiry is due by time instead: the earliest deadline of an observation
neither expired nor erased, lowered by captures and shortened deadlines at
write time and recomputed by the expiry drain.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, LiteralString
from uuid import UUID

from palimpsest.projections.store.sql import schema_query, schema_sql
from palimpsest.projections.store.tenancy import (
    queued_transaction,
    read_transaction,
    tenant_transaction,
)

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore
    from psycopg import Cursor

__all__ = [
    "Kind",
    "PassKind",
    "busy_tenants",
    "due_work",
    "expiry_due",
    "mark_index_due",
    "mark_published",
    "mark_written",
    "marked_tenants",
    "note_done",
    "recompute_expiry",
]

Kind = Literal["deletion", "index", "retention", "revision"]
"""A kind of work marked by position or count (expiry is marked by time)."""

PassKind = Literal["deletion", "retention", "revision", "expiry"]
"""A kind of work :func:`due_work` reads for a drain pass."""

_MARKED: dict[Kind, LiteralString] = {
    "deletion": "SELECT tenant_id, deletion_marked AS seen FROM {schema}.tenant_work"
    " WHERE deletion_marked > deletion_done",
    "index": "SELECT tenant_id, marked AS seen FROM {schema}.index_tenants WHERE marked > indexed",
    "retention": "SELECT tenant_id, retention_marked AS seen FROM {schema}.tenant_work"
    " WHERE retention_marked > retention_done",
    "revision": "SELECT tenant_id, marked_position AS seen FROM {schema}.revision_tenants"
    " WHERE marked_position > drained_position",
}

_DONE: dict[Kind, LiteralString] = {
    "deletion": "UPDATE {schema}.tenant_work SET deletion_done = greatest(deletion_done, %s)"
    " WHERE tenant_id = %s",
    "index": "UPDATE {schema}.index_tenants SET indexed = greatest(indexed, %s)"
    " WHERE tenant_id = %s",
    "retention": "UPDATE {schema}.tenant_work SET retention_done = greatest(retention_done, %s)"
    " WHERE tenant_id = %s",
    "revision": "UPDATE {schema}.revision_tenants"
    " SET drained_position = greatest(drained_position, %s) WHERE tenant_id = %s",
}

_MARK_WRITTEN = (
    "INSERT INTO {schema}.tenant_work (tenant_id, expiry_due_at, retention_marked,"
    " deletion_marked) SELECT {schema}.current_tenant(), %s::timestamptz,"
    " CASE WHEN %s OR (%s AND EXISTS (SELECT 1 FROM {schema}.tenant_retention))"
    " THEN {position} ELSE 0 END, CASE WHEN %s THEN {position} ELSE 0 END"
    " ON CONFLICT (tenant_id) DO UPDATE SET"
    " expiry_due_at = least(tenant_work.expiry_due_at, excluded.expiry_due_at),"
    " retention_marked = greatest(tenant_work.retention_marked, excluded.retention_marked),"
    " deletion_marked = greatest(tenant_work.deletion_marked, excluded.deletion_marked)"
)


def mark_written(
    curs: Cursor[Any],
    schema: str,
    *,
    earliest_deadline: datetime | None,
    retention: bool,
    captured: bool,
    deletion: bool,
) -> None:
    """Mark the write's tenant for the work its events make, in the write's transaction.

    Captures and shortened deadlines lower the tenant's earliest deadline
    (``earliest_deadline``, the earliest of theirs); a retention change
    (``retention``), or a capture (``captured``) in a tenant that set a retention
    (it may have read the policy before the change committed), marks retention; a
    tenant deletion request (``deletion``) marks deletion. With none of these,
    nothing is marked.
    """
    if not (earliest_deadline is not None or retention or deletion):
        return
    curs.execute(
        schema_query(_MARK_WRITTEN, schema),
        (earliest_deadline, retention, captured, deletion),
    )


def mark_published(curs: Cursor[Any], schema: str, tenant_id: UUID) -> None:
    """Count a publish of ``tenant_id``'s beliefs, in the publishing transaction: recall
    has versions to index."""
    curs.execute(
        schema_query(
            "INSERT INTO {schema}.index_tenants (tenant_id, marked, published_at)"
            " VALUES (%s, 1, clock_timestamp()) ON CONFLICT (tenant_id) DO UPDATE SET"
            " marked = index_tenants.marked + 1, published_at = excluded.published_at",
            schema,
        ),
        (tenant_id,),
    )


def mark_index_due(datastore: PostgresDatastore, tenant_id: UUID) -> None:
    """Mark ``tenant_id`` for indexing (the indexing drain found work no publish
    marked: memories made due again by a model change)."""
    with datastore.transaction(commit=True) as cur:
        cur.execute(
            schema_sql(
                "INSERT INTO {schema}.index_tenants (tenant_id, marked) VALUES (%s, 1)"
                " ON CONFLICT (tenant_id) DO UPDATE SET marked = index_tenants.marked + 1",
                datastore.schema,
            ),
            (tenant_id,),
        )


def marked_tenants(datastore: PostgresDatastore, kind: Kind) -> dict[UUID, int]:
    """Return the tenants with ``kind`` of work due, each with the mark seen."""
    # One round trip (a drain pass reads this for indexing after every publish).
    with queued_transaction(datastore, None, commit=False) as cur:
        cur.execute(schema_query(_MARKED[kind], datastore.schema))
        marked = cur.answer()
    return dict(marked.rows)


def note_done(datastore: PostgresDatastore, tenant_id: UUID, kind: Kind, seen: int) -> None:
    """Record that ``tenant_id`` had no ``kind`` of work left once every mark up to
    ``seen`` had committed (call it only after looking, having read ``seen`` before)."""
    with datastore.transaction(commit=True) as cur:
        cur.execute(schema_sql(_DONE[kind], datastore.schema), (seen, tenant_id))


_EXPIRY_DUE = "SELECT tenant_id, 0 AS seen FROM {schema}.tenant_work WHERE expiry_due_at <= %s"

_PASS_KINDS: tuple[Kind, ...] = ("deletion", "retention", "revision")
"""The marked kinds :func:`due_work` reads (indexing reads its own, after revisions
have marked what they publish)."""

_ALL_DUE = " UNION ALL ".join(
    [
        *(
            "SELECT '" + kind + "' AS kind, d.tenant_id, d.seen FROM (" + _MARKED[kind] + ") AS d"
            for kind in _PASS_KINDS
        ),
        "SELECT 'expiry' AS kind, d.tenant_id, d.seen FROM (" + _EXPIRY_DUE + ") AS d",
    ]
)


def expiry_due(datastore: PostgresDatastore, now: datetime) -> list[UUID]:
    """Return the tenants with an observation whose deadline may have passed by ``now``."""
    with read_transaction(datastore) as cur:
        cur.execute(schema_sql(_EXPIRY_DUE, datastore.schema), (now,))
        return [row["tenant_id"] for row in cur]


def due_work(datastore: PostgresDatastore, now: datetime) -> dict[PassKind, dict[UUID, int]]:
    """Return, in one statement, what :func:`marked_tenants` returns for tenant
    deletion, retention and revision, and :func:`expiry_due` for ``now`` (as marks of
    0), by kind: what a drain pass reads before its first stage, in one round trip
    where asking kind by kind took four."""
    due: dict[PassKind, dict[UUID, int]] = {
        "deletion": {},
        "retention": {},
        "revision": {},
        "expiry": {},
    }
    with queued_transaction(datastore, None, commit=False) as cur:  # one round trip
        cur.execute(schema_query(_ALL_DUE, datastore.schema), (now,))
        rows = cur.answer()
    for kind, tenant_id, seen in rows.rows:
        due[kind][tenant_id] = seen
    return due


def recompute_expiry(datastore: PostgresDatastore, tenant_id: UUID) -> None:
    """Set the tenant's earliest deadline from its observations neither expired nor erased.

    The tenant's row is locked first, and the deadlines read in a statement
    after that: a capture that lowered the deadline meanwhile has committed
    (its transaction held the row) and is seen; one that comes later waits,
    then lowers it again.
    """
    schema = datastore.schema
    with tenant_transaction(datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "SELECT 1 FROM {schema}.tenant_work WHERE tenant_id = %s FOR UPDATE", schema
            ),
            (tenant_id,),
        )
        cur.execute(
            schema_sql(
                "UPDATE {schema}.tenant_work SET expiry_due_at = (SELECT min(deadline)"
                " FROM {schema}.observation_deadlines"
                " WHERE expired_position IS NULL AND erased_position IS NULL)"
                " WHERE tenant_id = %s",
                schema,
            ),
            (tenant_id,),
        )


def busy_tenants(datastore: PostgresDatastore) -> tuple[int, list[UUID]]:
    """Return the log head over all tenants, and the tenants whose revision figures may
    not be zero: memories dirty or not indexed, or beliefs published in the last
    minute. Idle tenants are left out; their figures are all zero."""
    with read_transaction(datastore) as cur:
        cur.execute(
            schema_sql(
                "SELECT (SELECT coalesce(max(marked_position), 0)"
                " FROM {schema}.revision_tenants) AS head, array("
                " SELECT tenant_id FROM {schema}.revision_tenants"
                "  WHERE marked_position > drained_position"
                " UNION SELECT tenant_id FROM {schema}.index_tenants WHERE marked > indexed"
                " UNION SELECT tenant_id FROM {schema}.index_tenants"
                "  WHERE published_at > clock_timestamp() - interval '60 s') AS busy",
                datastore.schema,
            )
        )
        row = cur.fetchone()
    assert row is not None
    return int(row["head"]), list(row["busy"])
