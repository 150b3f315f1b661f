"""Migrations: Alembic builds the same store the runner before it did, and adopts its stores.

Each test migrates schemas of its own in the session's database (the schema is
a deployment setting), and drops them afterwards.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from psycopg import sql
from sqlalchemy.schema import CreateSchema

from palimpsest.domain.tenant import Tenant
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.runtime import Runtime, table_writers
from palimpsest.projections.store import migrations
from palimpsest.projections.store.database import Database
from palimpsest.projections.store.errors import DatabaseUnavailableError, SchemaTooNewError
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.migrations import migrate, schema_version
from palimpsest.projections.store.migrations.runner import alembic_config
from palimpsest.projections.store.tenancy import tenant_scope
from tests.conftest import RunDatabase
from tests.projections.store import legacy_runner

# Every revision the scripts hold, oldest first (each file is named by its revision).
REVISIONS = sorted(
    path.name[:4]
    for path in (Path(migrations.__file__).parent / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
)

# What the catalog holds about a schema, as rows with the schema's name
# replaced by "{schema}", so two schemas built the same way compare equal.
_CATALOG: dict[str, str] = {
    "relations": (
        "SELECT c.relname, c.relkind::text, c.relrowsecurity, c.relforcerowsecurity,"
        " pg_get_userbyid(c.relowner), obj_description(c.oid, 'pg_class')"
        " FROM pg_class c WHERE c.relnamespace = %(schema)s::text::regnamespace"
    ),
    "columns": (
        "SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),"
        " a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity::text,"
        " a.attgenerated::text, a.attcollation::regcollation::text"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
        " WHERE c.relnamespace = %(schema)s::text::regnamespace"
        " AND c.relkind IN ('r', 'p', 'v', 'c') AND a.attnum > 0 AND NOT a.attisdropped"
    ),
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s::text",
    "constraints": (
        "SELECT conrelid::regclass::text, conname, contype::text, pg_get_constraintdef(oid)"
        " FROM pg_constraint WHERE connamespace = %(schema)s::text::regnamespace"
    ),
    "policies": (
        "SELECT tablename, policyname, permissive, roles::text[], cmd, qual, with_check"
        " FROM pg_policies WHERE schemaname = %(schema)s::text"
    ),
    "triggers": (
        "SELECT t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid)"
        " FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " WHERE c.relnamespace = %(schema)s::text::regnamespace AND NOT t.tgisinternal"
    ),
    "functions": (
        "SELECT proname, pg_get_functiondef(oid), pg_get_userbyid(proowner)"
        " FROM pg_proc WHERE pronamespace = %(schema)s::text::regnamespace"
    ),
    "sequences": (
        "SELECT sequencename, data_type::text, start_value, increment_by, cycle"
        " FROM pg_sequences WHERE schemaname = %(schema)s::text"
    ),
    # Every grant in the schema (to the runtime role, the owner and PUBLIC): on
    # tables and sequences, functions, and the schema itself.
    "grants": (
        "SELECT c.relname, coalesce(pg_get_userbyid(nullif(a.grantee, 0)), 'PUBLIC'),"
        " a.privilege_type, a.is_grantable"
        " FROM pg_class c, aclexplode(c.relacl) a"
        " WHERE c.relnamespace = %(schema)s::text::regnamespace"
        " UNION ALL SELECT p.proname || '()',"
        " coalesce(pg_get_userbyid(nullif(a.grantee, 0)), 'PUBLIC'),"
        " a.privilege_type, a.is_grantable"
        " FROM pg_proc p, aclexplode(p.proacl) a"
        " WHERE p.pronamespace = %(schema)s::text::regnamespace"
        " UNION ALL SELECT '(schema)', coalesce(pg_get_userbyid(nullif(a.grantee, 0)), 'PUBLIC'),"
        " a.privilege_type, a.is_grantable"
        " FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.nspname = %(schema)s::text"
    ),
}


def describe(database: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Return what the catalog holds about ``database.schema`` (see ``_CATALOG``)."""
    schema = database.schema

    def normal(value: Any) -> Any:
        if isinstance(value, list):
            return tuple(normal(v) for v in value)
        return value.replace(schema, "{schema}") if isinstance(value, str) else value

    with database.owner_connection() as conn:
        return {
            name: sorted(
                (tuple(normal(v) for v in row) for row in conn.execute(query, {"schema": schema})),
                key=repr,
            )
            for name, query in _CATALOG.items()
        }


@pytest.fixture
def schemas(runtime: Runtime) -> Iterator[Any]:
    """Return ``make(prefix)``: a Database on a new, empty schema; all dropped afterwards."""
    made: list[str] = []

    def make(prefix: str) -> Database:
        made.append(f"{prefix}_{uuid.uuid4().hex[:10]}")
        return replace(runtime.database, schema=made[-1])

    yield make
    with runtime.database.owner_connection() as conn:
        for schema in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="module")
def fresh_catalog(runtime: Runtime) -> Iterator[dict[str, list[tuple[Any, ...]]]]:
    """The catalog of a schema built by the Alembic revisions alone."""
    database = replace(runtime.database, schema=f"fresh_{uuid.uuid4().hex[:10]}")
    try:
        assert migrate(database) == REVISIONS
        yield describe(database)
    finally:
        with runtime.database.owner_connection() as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{database.schema}" CASCADE')


def _legacy_ledger_exists(database: Database) -> bool:
    with database.owner_connection() as conn:
        row = conn.execute(
            "SELECT to_regclass(%s)", (f'"{database.schema}".schema_migrations',)
        ).fetchone()
    return row is not None and row[0] is not None


@pytest.mark.parametrize("legacy_version", [9, 5])
def test_a_store_from_before_alembic_is_adopted_and_equals_a_fresh_one(
    schemas: Any,
    fresh_catalog: dict[str, list[tuple[Any, ...]]],
    monkeypatch: pytest.MonkeyPatch,
    legacy_version: int,
) -> None:
    # Given a store the runner before Alembic migrated to legacy_version
    database: Database = schemas("legacy")
    monkeypatch.setattr(legacy_runner, "MIGRATIONS", legacy_runner.MIGRATIONS[:legacy_version])
    assert legacy_runner.migrate(database) == list(range(1, legacy_version + 1))
    assert schema_version(database) == f"{legacy_version:04d}"
    # When it is migrated now
    applied = migrate(database)
    # Then it was stamped where it stood, the rest applied, and its ledger dropped;
    # its catalog is the fresh store's, grants, policies and triggers included
    assert applied == REVISIONS[legacy_version:]
    assert schema_version(database) == REVISIONS[-1]
    assert not _legacy_ledger_exists(database)
    assert describe(database) == fresh_catalog
    assert migrate(database) == []


def test_what_a_store_held_before_alembic_is_still_there_after(
    schemas: Any, test_database: RunDatabase
) -> None:
    # Given a tenant written to a store the runner before Alembic made
    database: Database = schemas("legacy")
    legacy_runner.migrate(database)
    env = database.event_store_env(test_database.settings)
    log = EventLog(env=env, writers=table_writers())
    try:
        founded = create_tenant(log, "from-before-alembic")
    finally:
        log.close()
    # When the store is migrated now
    migrate(database)
    # Then the tenant loads from its log as before
    log = EventLog(env=env, writers=table_writers())
    try:
        with tenant_scope(founded.tenant_id):
            tenant: Tenant = log.repository.get(founded.tenant_id)
    finally:
        log.close()
    assert tenant.name == "from-before-alembic"


def test_a_ledger_newer_than_the_runner_before_alembic_is_refused(schemas: Any) -> None:
    database: Database = schemas("legacy")
    legacy_runner.migrate(database)
    with database.owner_connection() as conn:
        conn.execute(
            f'INSERT INTO "{database.schema}".schema_migrations VALUES (10, %s)', ("future",)
        )
    with pytest.raises(SchemaTooNewError):
        migrate(database)
    assert _legacy_ledger_exists(database)


def test_a_failing_revision_is_reported_and_the_revisions_before_it_stay(
    schemas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a store at version 5 (before Alembic) where revision 0006's new table exists
    database: Database = schemas("broken")
    monkeypatch.setattr(legacy_runner, "MIGRATIONS", legacy_runner.MIGRATIONS[:5])
    legacy_runner.migrate(database)
    with database.owner_connection() as conn:
        conn.execute(f'CREATE TABLE "{database.schema}".tenant_retention (x int)')
    # When it is migrated
    with pytest.raises(DatabaseUnavailableError, match="0006"):
        migrate(database)
    # Then it was adopted at 0005, and nothing of 0006 (whose first step adds a
    # column) was applied
    assert schema_version(database) == "0005"
    with database.owner_connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass"
            " AND attname = 'transient'",
            (f'"{database.schema}".observation_deadlines',),
        ).fetchone()
    assert row is not None and row[0] == 0


def test_two_processes_migrating_at_once_apply_each_revision_once(schemas: Any) -> None:
    database: Database = schemas("racing")
    results: list[list[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def run() -> None:
        start.wait()
        try:
            results.append(migrate(database))
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results) == [[], REVISIONS]


def test_an_unreachable_database_is_reported_as_unavailable(runtime: Runtime) -> None:
    database = replace(runtime.database, port=1, host="127.0.0.1")
    with pytest.raises(DatabaseUnavailableError):
        migrate(database)


def _migrated_to(database: Database, revision: str) -> None:
    """Migrate ``database`` to ``revision`` (not beyond)."""
    with alembic_config(database) as config:
        connection = config.attributes["connection"]
        connection.execute(CreateSchema(database.schema, if_not_exists=True))
        connection.commit()
        command.upgrade(config, revision)


def _store_with_words(
    database: Database, revision: str, tenant: uuid.UUID, texts: list[str]
) -> list[uuid.UUID]:
    """Migrate ``database`` to ``revision`` and give ``tenant`` one indexed memory per
    text (its ``memory_texts`` document and ``memory_lexemes`` rows, as that revision
    held them); return the memories' ids."""
    _migrated_to(database, revision)
    schema = sql.Identifier(database.schema)
    memories = [uuid.uuid4() for _ in texts]
    with database.owner_connection() as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.revision_tenants (tenant_id, marked_position) VALUES (%s, 0)"
            ).format(s=schema),
            (tenant,),
        )
        for memory, text in zip(memories, texts, strict=True):
            conn.execute(
                sql.SQL(
                    "INSERT INTO {s}.memory_texts (tenant_id, memory_id, version_id,"
                    " content_digest, revision, memory_type, scope, document)"
                    " VALUES (%s, %s, %s, 'd', 1, 'fact', 'user', to_tsvector('english', %s))"
                ).format(s=schema),
                (tenant, memory, uuid.uuid4(), text),
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {s}.memory_lexemes (tenant_id, lexeme, memory_id)"
                    " SELECT %s, l, %s FROM unnest(tsvector_to_array(to_tsvector('english', %s)))"
                    " AS l"
                ).format(s=schema),
                (tenant, memory, text),
            )
    return memories


def test_revision_0018_counts_the_words_a_store_already_held(schemas: Any) -> None:
    # Given a store at revision 0017 whose tenant has indexed words
    database: Database = schemas("words")
    tenant = uuid.uuid4()
    texts = ["Ticket PAL-7 blocks the release", "The release train leaves on Friday", ""]
    _store_with_words(database, "0017", tenant, texts)
    # When it is migrated to the newest revision
    assert migrate(database)[0] == "0018"
    # Then each word is counted once per memory holding it, and the memories holding any
    schema = sql.Identifier(database.schema)
    with database.owner_connection() as conn:
        counts = dict(
            conn.execute(
                sql.SQL(
                    "SELECT lexeme, memories FROM {s}.lexeme_counts WHERE tenant_id = %s"
                ).format(s=schema),
                (tenant,),
            ).fetchall()
        )
    assert counts["releas"] == 2 and counts["ticket"] == 1 and counts["friday"] == 1
    assert counts[""] == 2  # the empty text holds no word


def test_revision_0019_counts_the_positions_of_each_word_a_store_already_held(
    schemas: Any,
) -> None:
    # Given a store at revision 0018 whose tenant has indexed words, some held twice
    database: Database = schemas("occurrences")
    text = "The release train leaves on Friday; the release notes leave with it"
    (memory,) = _store_with_words(database, "0018", uuid.uuid4(), [text])
    # When it is migrated to the newest revision
    assert migrate(database)[0] == "0019"
    # Then each word counts the positions its memory holds it at
    with database.owner_connection() as conn:
        occurrences = dict(
            conn.execute(
                sql.SQL(
                    "SELECT lexeme, occurrences FROM {s}.memory_lexemes WHERE memory_id = %s"
                ).format(s=sql.Identifier(database.schema)),
                (memory,),
            ).fetchall()
        )
    assert occurrences["releas"] == 2 and occurrences["leav"] == 2
    assert occurrences["train"] == 1 and occurrences["friday"] == 1


@pytest.mark.slow
def test_revision_0021_drops_counts_of_zero_and_names_each_proposals_memories(
    schemas: Any,
) -> None:
    # Given a store at revision 0020 holding a count of zero (a word whose last memory
    # was erased) and a merge proposal over two memories, its note holding U+0000
    database: Database = schemas("erasure")
    tenant = uuid.uuid4()
    _migrated_to(database, "0020")
    proposal, centre, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    seen = [
        {"memory_id": str(m), "version_id": str(uuid.uuid4()), "content_digest": "d"}
        for m in (centre, other)
    ]
    state = json.dumps(
        {"memory_id": {"_type_": "uuid_hex", "_data_": centre.hex}, "seen": seen, "note": "\0"},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    schema = sql.Identifier(database.schema)
    with database.owner_connection() as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.revision_tenants (tenant_id, marked_position) VALUES (%s, 0)"
            ).format(s=schema),
            (tenant,),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.lexeme_counts (tenant_id, lexeme, memories)"
                " VALUES (%s, 'zephyr', 0), (%s, 'ticket', 1), (%s, '', 1)"
            ).format(s=schema),
            (tenant, tenant, tenant),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.palimpsest_events"
                " (tenant_id, originator_id, originator_version, topic, state)"
                " VALUES (%s, %s, 1, 'palimpsest:RetentionProposed', %s)"
            ).format(s=schema),
            (tenant, proposal, state.encode()),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.retention_proposals (tenant_id, proposal_id, memory_id, action,"
                " status, model, run_id, created_at, position)"
                " VALUES (%s, %s, %s, 'merge', 'proposed', 'extractive', %s, now(), 1)"
            ).format(s=schema),
            (tenant, proposal, centre, uuid.uuid4()),
        )
    # When it is migrated to the newest revision
    assert migrate(database)[0] == "0021"
    # Then the count of zero is gone, the others stay, and the proposal names both memories
    with database.owner_connection() as conn:
        counts = dict(
            conn.execute(
                sql.SQL(
                    "SELECT lexeme, memories FROM {s}.lexeme_counts WHERE tenant_id = %s"
                ).format(s=schema),
                (tenant,),
            ).fetchall()
        )
        sources = conn.execute(
            sql.SQL("SELECT source_ids FROM {s}.retention_proposals WHERE proposal_id = %s").format(
                s=schema
            ),
            (proposal,),
        ).fetchone()
    assert "zephyr" not in counts and counts["ticket"] == 1 and counts[""] == 1
    assert sources is not None and sources[0] == [centre, other]
