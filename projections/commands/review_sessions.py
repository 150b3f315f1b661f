"""The review page's sign-ins, kept in the database so every process sees them.

A row is stored under its tenant (row-level security, as tokens are) and found
by the SHA-256 digest of the cookie's secret; it holds the token sealed under
that secret, so the table alone opens nothing. Sealing, cookies and the clock
are the caller's (:mod:`palimpsest.api._sessions`); this module stores, finds and
ends rows. Not state the log explains: a sign-in is no fact about memories, and
rebuild neither reads nor writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["StoredSession", "end_session", "start_session", "use_session"]


@dataclass(frozen=True)
class StoredSession:
    """A live sign-in as stored: the sealed token, and when it began."""

    sealed_token: bytes
    started_at: datetime


def start_session(
    log: EventLog,
    tenant_id: UUID,
    digest: bytes,
    session: StoredSession,
    *,
    now: datetime,
    idle: timedelta,
    lifetime: timedelta,
    capacity: int,
) -> None:
    """Store a new sign-in; in the same transaction drop the tenant's ended ones, and
    its oldest beyond ``capacity`` (the new one included)."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "DELETE FROM {schema}.review_sessions WHERE tenant_id = %s"
                " AND (seen_at < %s OR started_at < %s)",
                schema,
            ),
            (tenant_id, now - idle, now - lifetime),
        )
        cur.execute(
            schema_sql(
                "INSERT INTO {schema}.review_sessions"
                " (tenant_id, session_digest, sealed_token, started_at, seen_at)"
                " VALUES (%s, %s, %s, %s, %s)",
                schema,
            ),
            (tenant_id, digest, session.sealed_token, now, now),
        )
        cur.execute(
            schema_sql(
                "DELETE FROM {schema}.review_sessions WHERE tenant_id = %s AND session_digest IN"
                " (SELECT session_digest FROM {schema}.review_sessions WHERE tenant_id = %s"
                "  ORDER BY started_at DESC, session_digest OFFSET %s)",
                schema,
            ),
            (tenant_id, tenant_id, capacity),
        )


def use_session(
    log: EventLog,
    tenant_id: UUID,
    digest: bytes,
    *,
    now: datetime,
    idle: timedelta,
    lifetime: timedelta,
) -> StoredSession | None:
    """Return the live sign-in stored under ``digest`` and mark it used now, or None
    (none, or one that has ended: it is dropped)."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "UPDATE {schema}.review_sessions SET seen_at = %s"
                " WHERE tenant_id = %s AND session_digest = %s"
                " AND seen_at >= %s AND started_at >= %s"
                " RETURNING sealed_token, started_at",
                schema,
            ),
            (now, tenant_id, digest, now - idle, now - lifetime),
        )
        row = cur.fetchone()
        if row is None:
            cur.execute(
                schema_sql(
                    "DELETE FROM {schema}.review_sessions"
                    " WHERE tenant_id = %s AND session_digest = %s",
                    schema,
                ),
                (tenant_id, digest),
            )
            return None
    return StoredSession(bytes(row["sealed_token"]), row["started_at"])


def end_session(log: EventLog, tenant_id: UUID, digest: bytes) -> None:
    """End the sign-in stored under ``digest``, if there is one."""
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "DELETE FROM {schema}.review_sessions WHERE tenant_id = %s AND session_digest = %s",
                log.datastore.schema,
            ),
            (tenant_id, digest),
        )
