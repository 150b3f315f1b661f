"""The schema runner before Alembic, kept verbatim as a test fixture (not product code).

It builds stores the way palimpsest did before issue 11, with its
``schema_migrations`` ledger, so a test can check that ``migrate`` adopts them
and leaves them identical to a store Alembic built. Its original docstring:

Versioned, forward-only schema migrations, run as the owner role.

Migrations run before any application or worker connects (``palimpsest
migrate``, and ``palimpsest serve`` at start): DDL on the events table under a
running application breaks its prepared ``SELECT *`` statements until the
connections are recycled (research/eventsourcing.md §6.3).

Each migration runs in its own transaction under an advisory lock, so two
processes migrating at once apply each step exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg import sql

from palimpsest.projections.store.errors import DatabaseUnavailableError, SchemaTooNewError

if TYPE_CHECKING:
    import psycopg

    from palimpsest.projections.store.database import Database

__all__ = [
    "EMBEDDINGS_TABLE",
    "EVENTS_TABLE",
    "MIGRATIONS",
    "Migration",
    "SNAPSHOTS_TABLE",
    "migrate",
    "schema_version",
    "vector_index_ddl",
]

_log = logging.getLogger(__name__)

EVENTS_TABLE = "palimpsest_events"
"""The eventsourcing application's events table (application name ``palimpsest``)."""

SNAPSHOTS_TABLE = "palimpsest_snapshots"
"""The library's snapshots of aggregates: a cache of the log, never part of it."""

_ADVISORY_LOCK_KEY = 0x70616C696D  # "palim"


@dataclass(frozen=True)
class Migration:
    """One schema step: its version, what it does, and the function applying it."""

    version: int
    name: str
    apply: Callable[[psycopg.Cursor[Any], Database], None]


def _library_event_table_ddl(database: Database) -> list[sql.Composed]:
    """Return the library's own DDL for the events table, its type and index.

    Taking the statements from the library (rather than copying them) keeps
    the table exactly what its recorder expects. The PL/pgSQL insert function
    is left out: it is only used with POSTGRES_ENABLE_DB_FUNCTIONS, which
    must stay off.
    """
    datastore = PostgresDatastore(
        dbname=database.dbname,
        host=database.host,
        port=database.port,
        user=database.owner_user,
        password=database.owner_password,
        schema=database.schema,
    )
    datastore.register_type_adapters = lambda: None  # type: ignore[method-assign]
    recorder = PostgresApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
    return list(recorder.sql_create_statements[: recorder.create_insert_function_statement_index])


def _isolate_tenants(cur: psycopg.Cursor[Any], database: Database, tables: tuple[str, ...]) -> None:
    """Force row-level security on ``tables``: rows are seen and added only for the
    transaction's tenant (``palimpsest.tenant_id``), by every role but superusers."""
    for table in tables:
        fmt = {"schema": sql.Identifier(database.schema), "t": sql.Identifier(table)}
        for statement in (
            "ALTER TABLE {schema}.{t} ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE {schema}.{t} FORCE ROW LEVEL SECURITY",
            "CREATE POLICY tenant_reads ON {schema}.{t} FOR SELECT "
            "USING (tenant_id = {schema}.current_tenant())",
            "CREATE POLICY tenant_inserts ON {schema}.{t} FOR INSERT "
            "WITH CHECK (tenant_id = {schema}.current_tenant())",
        ):
            cur.execute(sql.SQL(statement).format(**fmt))


def _allow_tenant_updates(
    cur: psycopg.Cursor[Any], database: Database, tables: tuple[str, ...]
) -> None:
    """Let the transaction's tenant update its own rows of ``tables`` (and only its own)."""
    for table in tables:
        fmt = {"schema": sql.Identifier(database.schema), "t": sql.Identifier(table)}
        cur.execute(
            sql.SQL(
                "CREATE POLICY tenant_updates ON {schema}.{t} FOR UPDATE "
                "USING (tenant_id = {schema}.current_tenant()) "
                "WITH CHECK (tenant_id = {schema}.current_tenant())"
            ).format(**fmt)
        )


def _m0001_event_log(cur: psycopg.Cursor[Any], database: Database) -> None:
    schema = sql.Identifier(database.schema)
    app = sql.Identifier(database.app_user)
    fmt = {"schema": schema, "app": app}

    def run(statement: str, *params: object) -> None:
        cur.execute(sql.SQL(statement).format(**fmt), params or None)

    run("CREATE EXTENSION IF NOT EXISTS vector")
    run("CREATE SCHEMA IF NOT EXISTS {schema}")
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (database.app_user,))
    if cur.fetchone() is None:
        run("CREATE ROLE {app} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS")
    if database.app_password:
        cur.execute(
            sql.SQL("ALTER ROLE {app} PASSWORD {pw}").format(
                app=app, pw=sql.Literal(database.app_password)
            )
        )
    run("GRANT USAGE ON SCHEMA {schema} TO {app}")

    # The tenant of the current transaction; NULL (so inserts fail, reads see
    # nothing) when no tenant was set.
    run(
        "CREATE FUNCTION {schema}.current_tenant() RETURNS uuid LANGUAGE sql STABLE AS "
        "$$ SELECT nullif(current_setting('palimpsest.tenant_id', true), '')::uuid $$"
    )
    run("GRANT EXECUTE ON FUNCTION {schema}.current_tenant() TO {app}")

    # Events never change: no role, owner included, may update, delete or truncate them.
    run(
        "CREATE FUNCTION {schema}.refuse_change() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION '% on %.% is refused: the log is append-only', "
        "TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege'; END $$"
    )

    for statement in _library_event_table_ddl(database):
        cur.execute(statement)
    events = sql.Identifier(EVENTS_TABLE)
    fmt["events"] = events
    run(
        "ALTER TABLE {schema}.{events} "
        "ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
        "ADD COLUMN tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant()"
    )
    run("CREATE INDEX ON {schema}.{events} (tenant_id, notification_id)")
    run("CREATE INDEX ON {schema}.{events} (recorded_at)")
    run(
        "CREATE TRIGGER events_are_immutable BEFORE UPDATE OR DELETE ON {schema}.{events} "
        "FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_change()"
    )
    run(
        "CREATE TRIGGER events_are_not_truncated BEFORE TRUNCATE ON {schema}.{events} "
        "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()"
    )
    # UPDATE is granted only because LOCK TABLE ... IN EXCLUSIVE MODE, which the
    # library takes to make insert order equal commit order, requires it. No row
    # can be updated: there is no UPDATE policy and the trigger refuses it.
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.{events} TO {app}")
    run(
        "GRANT USAGE ON SEQUENCE {schema}.{seq} TO {app}".replace(
            "{seq}", sql.Identifier(f"{EVENTS_TABLE}_notification_id_seq").as_string(cur)
        )
    )

    run(
        "CREATE TABLE {schema}.payloads ("
        " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
        " digest text NOT NULL,"
        " content bytea NOT NULL,"
        " size_bytes integer NOT NULL,"
        " stored_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
        " PRIMARY KEY (tenant_id, digest))"
    )
    run("GRANT SELECT, INSERT ON {schema}.payloads TO {app}")

    run(
        "CREATE TABLE {schema}.tokens ("
        " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
        " token_digest text NOT NULL PRIMARY KEY,"
        " token_id uuid NOT NULL UNIQUE,"
        " principal_id uuid NOT NULL,"
        " principal_name text NOT NULL,"
        " role text NOT NULL CHECK (role IN ('reader', 'writer', 'admin')))"
    )
    run("GRANT SELECT, INSERT ON {schema}.tokens TO {app}")

    run(
        "CREATE TABLE {schema}.idempotency_keys ("
        " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
        " principal_id uuid NOT NULL,"
        " key text NOT NULL,"
        " request_digest text NOT NULL,"
        " status_code integer NOT NULL,"
        " response jsonb NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
        " PRIMARY KEY (tenant_id, principal_id, key))"
    )
    run("GRANT SELECT, INSERT ON {schema}.idempotency_keys TO {app}")

    _isolate_tenants(cur, database, (EVENTS_TABLE, "payloads", "tokens", "idempotency_keys"))


def _ddl(cur: psycopg.Cursor[Any], database: Database, t: str | None = None) -> Callable[..., None]:
    """Return ``run(statement, **tables)``: executes DDL with ``{schema}``, ``{app}``
    and ``{t}`` (or the tables named in the call) filled in as identifiers."""
    names = {"schema": sql.Identifier(database.schema), "app": sql.Identifier(database.app_user)}
    if t is not None:
        names["t"] = sql.Identifier(t)

    def run(statement: str, **tables: str) -> None:
        more = {k: sql.Identifier(v) for k, v in tables.items()}
        cur.execute(sql.SQL(statement).format(**names, **more))

    return run


def _m0002_revision_watermark(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database)
    tenant = " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
    # requested: the highest log position of an accepted event that can change
    # the memory's labels; published: the requested revision the last finished
    # drain computed against. Both only ever grow.
    run(
        "CREATE TABLE {schema}.revisions ("
        + tenant
        + " memory_id uuid NOT NULL, requested bigint NOT NULL,"
        " published bigint NOT NULL DEFAULT 0,"
        " requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
        " claimed_until timestamptz, published_at timestamptz,"
        " PRIMARY KEY (tenant_id, memory_id), CHECK (published <= requested))"
    )
    run(
        "CREATE INDEX revisions_dirty ON {schema}.revisions (requested) WHERE published < requested"
    )
    run("CREATE INDEX ON {schema}.revisions (tenant_id, published_at)")
    run(
        "CREATE TABLE {schema}.memory_links ("
        + tenant
        + " memory_id uuid NOT NULL, linked_id uuid NOT NULL, kind text NOT NULL,"
        " outgoing boolean NOT NULL, edge_id uuid NOT NULL, position bigint NOT NULL,"
        " PRIMARY KEY (tenant_id, memory_id, edge_id))"
    )
    run(
        "CREATE TABLE {schema}.evidence_links ("
        + tenant
        + " observation_id uuid NOT NULL, memory_id uuid NOT NULL, position bigint NOT NULL,"
        " PRIMARY KEY (tenant_id, observation_id, memory_id))"
    )
    run("CREATE INDEX ON {schema}.evidence_links (tenant_id, memory_id)")
    # A memory's immutable attributes, written with MemoryCreated, so lists can
    # filter memories that no drain has computed yet.
    run(
        "CREATE TABLE {schema}.memory_index ("
        + tenant
        + " memory_id uuid NOT NULL, memory_type text NOT NULL, scope text NOT NULL,"
        " project text, topic text, position bigint NOT NULL,"
        " PRIMARY KEY (tenant_id, memory_id))"
    )
    run("CREATE INDEX ON {schema}.memory_index (tenant_id, position DESC)")
    # Retention deadlines, fixed at capture; expired_position is the write that
    # deleted the bytes. version_digests keeps expiry from deleting bytes that a
    # memory version shares (the payload store deduplicates by digest).
    run(
        "CREATE TABLE {schema}.observation_deadlines ("
        + tenant
        + " observation_id uuid NOT NULL, digest text NOT NULL, deadline timestamptz NOT NULL,"
        " expired_position bigint, PRIMARY KEY (tenant_id, observation_id))"
    )
    run(
        "CREATE INDEX observation_deadlines_due ON {schema}.observation_deadlines"
        " (tenant_id, deadline) WHERE expired_position IS NULL"
    )
    run("CREATE INDEX ON {schema}.observation_deadlines (tenant_id, digest)")
    run(
        "CREATE TABLE {schema}.version_digests ("
        + tenant
        + " digest text NOT NULL, memory_id uuid NOT NULL,"
        " PRIMARY KEY (tenant_id, digest, memory_id))"
    )
    run(
        "CREATE TABLE {schema}.proposer_links ("
        + tenant
        + " proposer_id uuid NOT NULL, model_id text NOT NULL, memory_id uuid NOT NULL,"
        " position bigint NOT NULL, PRIMARY KEY (tenant_id, proposer_id, model_id, memory_id))"
    )
    # The read model of current beliefs: written only by drains, every row
    # reproducible from the log by the projection function.
    run(
        "CREATE TABLE {schema}.beliefs ("
        + tenant
        + " memory_id uuid NOT NULL, revision bigint NOT NULL,"
        " memory_type text NOT NULL, scope text NOT NULL, project text, topic text,"
        " current_version_id uuid NOT NULL, grade text NOT NULL, belief jsonb NOT NULL,"
        " PRIMARY KEY (tenant_id, memory_id))"
    )
    run("CREATE INDEX ON {schema}.beliefs (tenant_id, memory_type, scope, project, memory_id)")
    # Which tenants may have dirty memories: ids and log positions only, no
    # tenant data, so a drain finds work without a role that bypasses RLS.
    # marked_position is the last write that marked the tenant; drained_position
    # the marked_position a drain saw before finding nothing dirty. Positions
    # follow commit order, so a tenant with marked > drained is never skipped.
    run(
        "CREATE TABLE {schema}.revision_tenants (tenant_id uuid PRIMARY KEY,"
        " marked_position bigint NOT NULL, drained_position bigint NOT NULL DEFAULT 0)"
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.revision_tenants TO {app}")
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.revisions TO {app}")
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.beliefs TO {app}")
    for table in (
        "memory_links",
        "evidence_links",
        "proposer_links",
        "memory_index",
        "version_digests",
    ):
        run("GRANT SELECT, INSERT ON {schema}.{t} TO {app}", t=table)
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.observation_deadlines TO {app}")
    # Raw expiry deletes payload bytes (never events): the one DELETE the role has.
    run("GRANT DELETE ON {schema}.payloads TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.payloads FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    _isolate_tenants(
        cur,
        database,
        (
            "revisions",
            "beliefs",
            "memory_links",
            "evidence_links",
            "proposer_links",
            "memory_index",
            "observation_deadlines",
            "version_digests",
        ),
    )
    _allow_tenant_updates(cur, database, ("revisions", "beliefs", "observation_deadlines"))


def _m0003_decisions(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database)
    # Each decision's logical key, so a replayed decision finds the original.
    run(
        "CREATE TABLE {schema}.decision_index ("
        " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
        " decision_id uuid NOT NULL, kind text NOT NULL, logical_key text NOT NULL,"
        " position bigint NOT NULL, PRIMARY KEY (tenant_id, decision_id))"
    )
    run("CREATE INDEX ON {schema}.decision_index (tenant_id, logical_key, position DESC)")
    run("GRANT SELECT, INSERT ON {schema}.decision_index TO {app}")
    _isolate_tenants(cur, database, ("decision_index",))


def _m0004_snapshots(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database, SNAPSHOTS_TABLE)
    # The library's snapshot table layout, with the tenant of each row. Snapshots
    # are derived from the log (rebuild rewrites them, verify checks them).
    run(
        "CREATE TABLE {schema}.{t} ("
        " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
        " originator_id uuid NOT NULL, originator_version bigint NOT NULL,"
        " topic text NOT NULL, state bytea NOT NULL,"
        " PRIMARY KEY (originator_id, originator_version))"
    )
    run("GRANT SELECT, INSERT ON {schema}.{t} TO {app}")
    _isolate_tenants(cur, database, (SNAPSHOTS_TABLE,))


def _m0005_memory_access(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database)
    # Tuning state for salience: how often and when reads returned each memory.
    # Never an event, never a label; losing it only resets ranking.
    run(
        "CREATE TABLE {schema}.memory_access ("
        " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
        " memory_id uuid NOT NULL, accesses bigint NOT NULL, last_access timestamptz NOT NULL,"
        " PRIMARY KEY (tenant_id, memory_id))"
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.memory_access TO {app}")
    _isolate_tenants(cur, database, ("memory_access",))
    _allow_tenant_updates(cur, database, ("memory_access",))


def _m0006_tenant_retention(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database)
    # Which retention applies to an observation (raw or transient) decides how a
    # tenant's shorter policy moves its deadline.
    run(
        "ALTER TABLE {schema}.observation_deadlines"
        " ADD COLUMN transient boolean NOT NULL DEFAULT false"
    )
    # The retention a tenant set (RetentionSet), as of the write that set it.
    run(
        "CREATE TABLE {schema}.tenant_retention ("
        " tenant_id uuid PRIMARY KEY DEFAULT {schema}.current_tenant(),"
        " raw_hours integer NOT NULL, transient_hours integer NOT NULL,"
        " position bigint NOT NULL)"
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.tenant_retention TO {app}")
    _isolate_tenants(cur, database, ("tenant_retention",))
    _allow_tenant_updates(cur, database, ("tenant_retention",))


def _m0007_erasure(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database)
    # The write that erased an observation's content (its bytes went with it).
    run("ALTER TABLE {schema}.observation_deadlines ADD COLUMN erased_position bigint")
    # The write that erased a memory, so lists skip it and tenant deletion finds
    # what is left to erase.
    run("ALTER TABLE {schema}.memory_index ADD COLUMN erased_position bigint")
    run("GRANT UPDATE ON {schema}.memory_index TO {app}")
    _allow_tenant_updates(cur, database, ("memory_index",))
    # The tenant deletion an erasure batch belongs to (receipts sum their batches).
    run("ALTER TABLE {schema}.decision_index ADD COLUMN part_of uuid")
    run("CREATE INDEX ON {schema}.decision_index (tenant_id, part_of) WHERE part_of IS NOT NULL")
    # An erased memory has no current version: its belief is a placeholder.
    run("ALTER TABLE {schema}.beliefs ALTER COLUMN current_version_id DROP NOT NULL")
    # Erasing a memory's last version of some content releases that digest (the
    # write's position), so the bytes can go; the row stays, as every read model's.
    run("ALTER TABLE {schema}.version_digests ADD COLUMN released_position bigint")
    run("GRANT UPDATE ON {schema}.version_digests TO {app}")
    _allow_tenant_updates(cur, database, ("version_digests",))
    # A tenant deletion in progress (completed_position NULL) or done: the tenant
    # is closed from the request on, and the erasure drain finds its work here.
    run(
        "CREATE TABLE {schema}.tenant_deletions ("
        " tenant_id uuid PRIMARY KEY DEFAULT {schema}.current_tenant(),"
        " decision_id uuid NOT NULL, requested_position bigint NOT NULL,"
        " completed_position bigint)"
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.tenant_deletions TO {app}")
    _isolate_tenants(cur, database, ("tenant_deletions",))
    _allow_tenant_updates(cur, database, ("tenant_deletions",))


EMBEDDINGS_TABLE = "memory_embeddings"
"""Recall's index: one vector per memory and embedding model, of its current version."""


def vector_index_ddl(schema: str, dimension: int) -> sql.Composed:
    """Return the DDL of the HNSW (cosine) index for vectors of ``dimension``.

    Vectors of every model live in one untyped column; each dimension gets a
    partial expression index, so a new model can be indexed beside the old one
    while reads go on. ``m = 8, ef_construction = 32`` (pgvector's defaults are
    16 and 64) halve the cost of each insert, which was a third of the indexing
    drain's time at 10,000 memories; recall holds it up at query time with a
    larger ``ef_search`` (docs/benchmarks.md has both measurements).
    """
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON {schema}.{table} USING hnsw"
        " ((embedding::vector({dim})) vector_cosine_ops) WITH (m = 8, ef_construction = 32)"
        " WHERE dimension = {dim}"
    ).format(
        name=sql.Identifier(f"{EMBEDDINGS_TABLE}_hnsw_{dimension}"),
        schema=sql.Identifier(schema),
        table=sql.Identifier(EMBEDDINGS_TABLE),
        dim=sql.Literal(dimension),
    )


def _m0008_embeddings(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database, EMBEDDINGS_TABLE)
    # Derived, like a cache: the indexing drain writes it from the payload store
    # and a model; erasure deletes rows in the erasing transaction. It is not a
    # read model of the log (rebuild cannot recompute it without the model).
    run(
        "CREATE TABLE {schema}.{t} ("
        " tenant_id uuid NOT NULL DEFAULT {schema}.current_tenant(),"
        " memory_id uuid NOT NULL, model_id text NOT NULL, dimension integer NOT NULL,"
        " version_id uuid NOT NULL, content_digest text NOT NULL, revision bigint NOT NULL,"
        " memory_type text NOT NULL, scope text NOT NULL, project text,"
        " embedding vector NOT NULL,"
        " embedded_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
        " PRIMARY KEY (tenant_id, memory_id, model_id),"
        " CHECK (vector_dims(embedding) = dimension))"
    )
    run("CREATE INDEX ON {schema}.{t} (tenant_id, model_id, memory_type, scope, project)")
    # The published revision the indexing drain last handled, per memory: work is
    # the rows below their published revision, found through a small partial index
    # instead of comparing every belief with every embedding on each pass.
    run("ALTER TABLE {schema}.revisions ADD COLUMN indexed bigint NOT NULL DEFAULT 0")
    run(
        "CREATE INDEX revisions_unindexed ON {schema}.revisions (tenant_id, published)"
        " WHERE indexed < published"
    )
    run("CREATE INDEX ON {schema}.{t} (version_id)")
    cur.execute(vector_index_ddl(database.schema, 384))
    run("GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.{t} TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.{t} FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    _isolate_tenants(cur, database, (EMBEDDINGS_TABLE,))
    _allow_tenant_updates(cur, database, (EMBEDDINGS_TABLE,))


def _m0009_recall_filters(cur: psycopg.Cursor[Any], database: Database) -> None:
    run = _ddl(cur, database, EMBEDDINGS_TABLE)
    # A selective filter on scope or project alone falls back to exact search
    # (docs/recall.md); without these it read every row of the tenant's model.
    for columns in ("tenant_id, model_id, project", "tenant_id, model_id, scope"):
        run(f"CREATE INDEX ON {{schema}}.{{t}} ({columns})")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "event log, payload store, tokens, idempotency keys, row-level security",
        _m0001_event_log,
    ),
    Migration(2, "revision watermark and dependency rows", _m0002_revision_watermark),
    Migration(3, "decision index", _m0003_decisions),
    Migration(4, "aggregate snapshots", _m0004_snapshots),
    Migration(5, "memory access counts for salience", _m0005_memory_access),
    Migration(6, "tenant retention policy", _m0006_tenant_retention),
    Migration(7, "erasure and tenant deletion", _m0007_erasure),
    Migration(8, "memory embeddings for recall", _m0008_embeddings),
    Migration(9, "recall filter indexes", _m0009_recall_filters),
)


def _ensure_ledger(cur: psycopg.Cursor[Any], database: Database) -> None:
    cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(database.schema)))
    cur.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
        ).format(sql.Identifier(database.schema))
    )


def _applied_version(cur: psycopg.Cursor[Any], database: Database) -> int:
    cur.execute(
        sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(
            sql.Identifier(database.schema)
        )
    )
    row = cur.fetchone()
    return int(row[0]) if row else 0


def schema_version(database: Database) -> int:
    """Return the newest migration applied to ``database`` (0 when none)."""
    with database.owner_connection() as conn, conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)", (f"{database.schema}.schema_migrations",))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return 0
        return _applied_version(cur, database)


def migrate(database: Database, progress: Callable[[str], None] | None = None) -> list[int]:
    """Apply every migration newer than the database's version, in order.

    Returns:
        The versions applied by this call (empty when already current).

    Raises:
        SchemaTooNewError: the database has a version this code does not know.
        DatabaseUnavailableError: a migration failed; nothing of it was applied.
    """
    import psycopg

    applied: list[int] = []
    newest_known = MIGRATIONS[-1].version
    with database.owner_connection() as conn:
        for migration in MIGRATIONS:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK_KEY,))
                _ensure_ledger(cur, database)
                current = _applied_version(cur, database)
                if current > newest_known:
                    msg = (
                        f"database schema version {current} is newer than this palimpsest "
                        f"knows ({newest_known}); upgrade palimpsest"
                    )
                    raise SchemaTooNewError(msg)
                if migration.version <= current:
                    continue
                if progress is not None:
                    progress(f"applying migration {migration.version}: {migration.name}")
                try:
                    migration.apply(cur, database)
                except psycopg.Error as e:
                    msg = f"migration {migration.version} ({migration.name}) failed: {e}"
                    raise DatabaseUnavailableError(msg.strip()) from e
                cur.execute(
                    sql.SQL(
                        "INSERT INTO {}.schema_migrations (version, name) VALUES (%s, %s)"
                    ).format(sql.Identifier(database.schema)),
                    (migration.version, migration.name),
                )
                applied.append(migration.version)
                _log.info("migration applied", extra={"version": migration.version})
    return applied
