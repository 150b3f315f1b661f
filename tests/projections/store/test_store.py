"""The database enforces what the service promises: append-only, tenant-scoped, migrated once."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from eventsourcing.persistence import PersistenceError

from palimpsest.domain.tenant import Tenant
from palimpsest.projections.commands.tokens import create_tenant, issue_token
from palimpsest.projections.runtime import Runtime, table_writers
from palimpsest.projections.store.database import open_database
from palimpsest.projections.store.embedded import ServeLock, _prune_dead_handles
from palimpsest.projections.store.errors import (
    DataDirectoryInUseError,
    PgvectorMissingError,
    SchemaTooNewError,
)
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.migrations import migrate, schema_version
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.store.tenancy import tenant_scope
from tests.conftest import Tenant as TenantFixture


def _events(runtime: Runtime) -> str:
    return f'"{runtime.database.schema}"."{EVENTS_TABLE}"'


def test_migrating_again_applies_nothing(runtime: Runtime) -> None:
    assert migrate(runtime.database) == []


def test_a_database_from_a_newer_palimpsest_is_refused(runtime: Runtime) -> None:
    schema = runtime.database.schema
    newest = schema_version(runtime.database)
    with runtime.database.owner_connection() as conn:
        conn.execute(f'UPDATE "{schema}".alembic_version SET version_num = %s', ("0999",))
    try:
        with pytest.raises(SchemaTooNewError):
            migrate(runtime.database)
    finally:
        with runtime.database.owner_connection() as conn:
            conn.execute(f'UPDATE "{schema}".alembic_version SET version_num = %s', (newest,))
    assert newest is not None and newest < "0999"


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM {t}",
        "UPDATE {t} SET topic = 'x'",
        "TRUNCATE {t}",
    ],
)
def test_no_role_not_even_the_owner_can_change_the_log(
    runtime: Runtime, tenant: TenantFixture, statement: str
) -> None:
    with (
        runtime.database.owner_connection() as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(statement.format(t=_events(runtime)))


def test_recorded_at_increases_with_log_position(runtime: Runtime, tenant: TenantFixture) -> None:
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f"SELECT notification_id, recorded_at FROM {_events(runtime)} ORDER BY notification_id"
        ).fetchall()
    times = [r[1] for r in rows]
    assert times == sorted(times)


def test_the_service_role_owns_nothing_and_cannot_delete_canonical_rows(runtime: Runtime) -> None:
    database = runtime.database
    with database.owner_connection() as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_get_userbyid(c.relowner),"
            " c.relrowsecurity, c.relforcerowsecurity,"
            " has_table_privilege(%s, c.oid, 'DELETE'), has_table_privilege(%s, c.oid, 'TRUNCATE')"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'"
            " WHERE n.nspname = %s AND c.relkind = 'r'",
            (database.app_user, database.app_user, database.schema),
        ).fetchall()
    assert {r[0] for r in rows} >= {
        EVENTS_TABLE,
        "payloads",
        "tokens",
        "idempotency_keys",
        "revisions",
        "beliefs",
    }
    for name, owner, rls, forced, can_delete, can_truncate in rows:
        if name in _WORK_DUE:
            continue  # ids only, so drains find work without bypassing RLS; checked below
        assert owner != database.app_user, name
        assert rls and forced, f"{name} must FORCE row-level security"
        assert not can_truncate, name
        # Only content may be deleted (raw expiry, erasure), and recall's index of it
        # (a derived cache, not a read model of the log: its words' counts go with the
        # last word, and its possible supersessions, rewritten from the vectors), and a
        # revoked token's lookup row (its TokenRevoked event stays), and a review
        # page's sign-in (signed out, or expired: no event, it is no belief); never
        # the log or read models.
        derived = {
            "memory_embeddings",
            "memory_texts",
            "memory_lexemes",
            "lexeme_counts",
            "conflict_marks",
        }
        assert can_delete == (name in {"payloads", "tokens", "review_sessions", *derived}), name


_WORK_DUE = {
    "revision_tenants": ["tenant_id", "marked_position", "drained_position"],
    "tenant_work": [
        "tenant_id",
        "expiry_due_at",
        "retention_marked",
        "retention_done",
        "deletion_marked",
        "deletion_done",
    ],
    "index_tenants": ["tenant_id", "marked", "indexed", "published_at"],
    "forgetting_runs": ["day", "started_at", "finished_at", "held_until"],
    "decay_cycle_claims": ["tenant_id", "slot", "claimed_at"],
    "drain_heartbeats": ["drain", "worker", "beat_at"],
}
"""The tables without row-level security: which tenants have work due (store/work_due.py),
which days the scheduled forgetting pass started (no tenant at all), which (tenant,
slot) of the decay cycle's schedule was claimed, and when each drain last beat (no
tenant either)."""


def test_the_only_tables_without_row_level_security_hold_tenant_ids_and_nothing_else(
    runtime: Runtime,
) -> None:
    with runtime.database.owner_connection() as conn:
        unprotected = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = 'r' AND NOT c.relforcerowsecurity"
                " AND c.relname <> 'alembic_version'",
                (runtime.database.schema,),
            )
        }
        assert unprotected == set(_WORK_DUE)
        for table, expected in _WORK_DUE.items():
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (f"{runtime.database.schema}.{table}",),
                )
            ]
            assert columns == expected, table


def test_events_cannot_be_inserted_without_a_tenant(runtime: Runtime) -> None:
    with (
        pytest.raises(PersistenceError, match="row-level security"),
        runtime.log.datastore.transaction(commit=True) as curs,
    ):
        curs.execute(
            f"INSERT INTO {_events(runtime)} (originator_id, originator_version, topic, state)"
            " VALUES (%s, 1, 'x', 'x')",
            (uuid.uuid4(),),
        )


def test_the_service_role_sees_no_rows_without_a_tenant(
    runtime: Runtime, tenant: TenantFixture
) -> None:
    with runtime.log.datastore.transaction(commit=False) as curs:
        for table in (EVENTS_TABLE, "payloads", "tokens", "idempotency_keys"):
            curs.execute(f'SELECT count(*) AS n FROM "{runtime.database.schema}"."{table}"')
            row = curs.fetchone()
            assert row is not None and row["n"] == 0, table


def test_a_database_without_pgvector_is_refused_with_a_clear_message() -> None:
    # Debian's PostgreSQL on this machine has no pgvector; elsewhere, skip.
    url = "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            has_vector = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
    except psycopg.Error:
        pytest.skip("no PostgreSQL without pgvector on 127.0.0.1:5432 to test against")
    if has_vector:
        pytest.skip("the PostgreSQL on 127.0.0.1:5432 has pgvector")
    with pytest.raises(PgvectorMissingError, match="no pgvector"):
        open_database(DatabaseSettings(database_url=url))


def test_a_second_server_on_a_data_directory_is_refused(tmp_path: Path) -> None:
    first = ServeLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(DataDirectoryInUseError, match=str(os.getpid())):
            ServeLock(tmp_path).acquire()
    finally:
        first.release()
    again = ServeLock(tmp_path)
    again.acquire()
    again.release()


def test_handles_of_dead_processes_are_forgotten(tmp_path: Path) -> None:
    handles = tmp_path / ".handle_pids.json"
    handles.write_text(json.dumps([os.getpid(), 2**22 + 12345]))
    _prune_dead_handles(tmp_path)
    assert json.loads(handles.read_text()) == [os.getpid()]


def test_a_second_process_attaches_to_the_running_embedded_server(
    runtime: Runtime, tenant: TenantFixture
) -> None:
    if runtime.database.embedded is None:
        pytest.skip("runs against the embedded default only")
    settings = DatabaseSettings(data_dir=Path(runtime.database.embedded.socket_dir).parent)
    second = open_database(settings)
    assert second.host == runtime.database.host
    log = EventLog(env=replace(second).event_store_env(settings), writers=table_writers())
    try:
        with tenant_scope(tenant.id):
            assert log.repository.get(tenant.id).id == tenant.id
    finally:
        log.close()


def test_tokens_issued_later_are_caused_by_the_founding_admin(runtime: Runtime) -> None:
    # Given a tenant whose admin is not called "admin"
    founder = create_tenant(runtime.log, "named-admin", admin_name="alice")
    # When the command line issues a token to a new principal
    issued = issue_token(runtime.log, founder.tenant_id, "agent-7", "writer")
    # Then only alice and agent-7 are principals, and alice caused the issue
    with tenant_scope(founder.tenant_id):
        tenant: Tenant = runtime.log.repository.get(founder.tenant_id)
        issued_event = list(runtime.log.events.get(founder.tenant_id))[-1]
    assert set(tenant.principals.values()) == {"alice", "agent-7"}
    assert isinstance(issued_event, Tenant.TokenIssued)
    assert issued_event.principal_id == founder.principal_id
    assert issued_event.holder_id == issued.principal_id
