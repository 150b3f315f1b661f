"""The tenant a unit of work runs for, and the transactions that enforce it.

Row-level security policies compare each row's ``tenant_id`` with the
``palimpsest.tenant_id`` setting. It is set with ``set_config(..., true)``,
which lasts only until the end of the transaction, so a pooled connection
never carries one tenant's setting into another's work.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from uuid import UUID

from projections.store.sql import schema_query

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore
    from psycopg import Cursor

__all__ = [
    "current_tenant",
    "known_tenants",
    "set_tenant",
    "tenant_scope",
    "tenant_transaction",
]

_current_tenant: ContextVar[UUID | None] = ContextVar("palimpsest_tenant", default=None)

SET_TENANT_SQL = "SELECT set_config('palimpsest.tenant_id', %s, true)"


@contextmanager
def tenant_scope(tenant_id: UUID) -> Iterator[None]:
    """Run the enclosed reads and writes for ``tenant_id``."""
    token = _current_tenant.set(tenant_id)
    try:
        yield
    finally:
        _current_tenant.reset(token)


def current_tenant() -> UUID | None:
    """Return the tenant of the enclosing :func:`tenant_scope`, if any."""
    return _current_tenant.get()


def set_tenant(curs: Cursor[Any], tenant_id: UUID | None) -> None:
    """Set the tenant for the rest of ``curs``'s transaction (none sees no rows)."""
    curs.execute(SET_TENANT_SQL, ("" if tenant_id is None else str(tenant_id),))


@contextmanager
def tenant_transaction(
    datastore: PostgresDatastore, tenant_id: UUID, *, commit: bool
) -> Iterator[Cursor[Any]]:
    """Yield a cursor in a transaction that sees only ``tenant_id``'s rows."""
    with datastore.transaction(commit=commit) as curs:
        set_tenant(curs, tenant_id)
        yield curs


def known_tenants(datastore: PostgresDatastore) -> list[UUID]:
    """Return every tenant that has written (ids only: the one table without RLS)."""
    with datastore.transaction(commit=False) as curs:
        curs.execute(
            schema_query("SELECT tenant_id FROM {schema}.revision_tenants", datastore.schema)
        )
        return [row["tenant_id"] for row in curs]
