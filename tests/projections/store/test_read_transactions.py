"""Read transactions: they refuse writes, and they keep what a connection prepared.

A read that ended in ``ROLLBACK`` made psycopg forget (and deallocate) every
statement its connection had prepared, so no statement of the service stayed
prepared for long: each read and write paid for parsing and planning again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import PostgresDatastore

from palimpsest.projections.runtime import Runtime, table_writers
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.store.tenancy import read_transaction, tenant_transaction
from tests.conftest import Tenant

_PREPARED = "SELECT 41 + 1 AS answer"


@pytest.fixture
def one_connection(runtime: Runtime) -> Iterator[PostgresDatastore]:
    """The runtime role's datastore, as the service configures it, with a pool of
    exactly one connection, so that consecutive transactions share it."""
    settings = DatabaseSettings(db_pool_size=1, db_max_overflow=0)
    log = EventLog(env=runtime.database.event_store_env(settings), writers=table_writers())
    yield log.datastore
    log.close()


def _still_prepared(datastore: PostgresDatastore) -> bool:
    with datastore.transaction(commit=True) as cur:
        cur.execute(
            "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement = %s",
            (_PREPARED,),
        )
        row = cur.fetchone()
    return row is not None and row["n"] == 1


def test_a_read_in_a_tenant_transaction_keeps_the_connections_prepared_statements(
    one_connection: PostgresDatastore, tenant: Tenant
) -> None:
    with tenant_transaction(one_connection, tenant.id, commit=False) as cur:
        cur.execute(_PREPARED, prepare=True)
        assert cur.fetchall() == [{"answer": 42}]
    assert _still_prepared(one_connection)


def test_a_read_transaction_keeps_the_connections_prepared_statements(
    one_connection: PostgresDatastore,
) -> None:
    with read_transaction(one_connection) as cur:
        cur.execute(_PREPARED, prepare=True)
    assert _still_prepared(one_connection)


def test_a_tenant_read_transaction_refuses_a_write_and_writes_nothing(
    runtime: Runtime, tenant: Tenant
) -> None:
    table = f'"{runtime.database.schema}".memory_access'
    memory_id = uuid.uuid4()
    with (
        pytest.raises(PersistenceError, match="read-only transaction"),
        tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur,
    ):
        cur.execute(
            f"INSERT INTO {table} (tenant_id, memory_id, accesses, last_access)"
            " VALUES (%s, %s, 1, now())",
            (tenant.id, memory_id),
        )
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=True) as cur:
        cur.execute(f"SELECT count(*) AS n FROM {table} WHERE memory_id = %s", (memory_id,))
        row = cur.fetchone()
    assert row is not None and row["n"] == 0
