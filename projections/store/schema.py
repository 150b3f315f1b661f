"""Every table the service owns, defined once (SQLAlchemy Core).

Table and column names have this one home: queries assembled from request
filters are built on these ``Table`` objects, and a test compares this
metadata with a database migrated by the Alembic revisions
(:mod:`palimpsest.projections.store.migrations`, each a frozen step of history that
spells out its own columns), so that a table changed without a migration
fails CI.

The tables carry no schema: the schema is a deployment setting
(``DatabaseSettings.schema``), applied when a statement is compiled
(:func:`palimpsest.projections.store.sql.compile_query`) and named as an identifier in
hand-written SQL. The eventsourcing library's own events table
(:data:`EVENTS_TABLE`) stays the library's: its DDL comes from the library.

Every tenant-scoped table's ``tenant_id`` defaults to the transaction's
tenant (``current_tenant()``); row-level security, its policies and the
grants to the runtime role are migration DDL with no Core construct.
"""

from __future__ import annotations

from pgvector.sqlalchemy import Vector
from psycopg import sql
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Date,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR

__all__ = [
    "EMBEDDINGS_TABLE",
    "EVENTS_TABLE",
    "SNAPSHOTS_TABLE",
    "TEXT_SEARCH_CONFIG",
    "archival_allowance",
    "beliefs",
    "conflict_marks",
    "decay_cycle_claims",
    "decay_cycles",
    "decision_index",
    "drain_heartbeats",
    "evidence_links",
    "forgetting_runs",
    "idempotency_keys",
    "index_tenants",
    "judge_usage",
    "lexeme_counts",
    "memory_access",
    "memory_embeddings",
    "memory_fades",
    "memory_index",
    "memory_lexemes",
    "memory_links",
    "memory_texts",
    "metadata",
    "observation_deadlines",
    "payloads",
    "proposer_links",
    "reflections",
    "retention_proposals",
    "review_sessions",
    "revision_tenants",
    "revisions",
    "snapshots",
    "tenant_deletions",
    "tenant_retention",
    "tenant_work",
    "tokens",
    "vector_index_ddl",
    "version_digests",
]

EVENTS_TABLE = "palimpsest_events"
"""The eventsourcing application's events table (application name ``palimpsest``)."""

SNAPSHOTS_TABLE = "palimpsest_snapshots"
"""The library's snapshots of aggregates: a cache of the log, never part of it."""

EMBEDDINGS_TABLE = "memory_embeddings"
"""Recall's index: one vector per memory and embedding model, of its current version."""

metadata = MetaData()
"""The service's tables, without a schema (see the module docstring)."""

_NOW = text("clock_timestamp()")


def _tenant(*, primary_key: bool = False) -> Column[object]:
    """The owning tenant's column: the transaction's tenant unless given."""
    return Column(
        "tenant_id",
        Uuid,
        primary_key=primary_key,
        nullable=False,
        server_default=text("current_tenant()"),
    )


payloads = Table(
    "payloads",
    metadata,
    _tenant(),
    Column("digest", Text, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("size_bytes", Integer, nullable=False),
    Column("stored_at", DateTime(timezone=True), nullable=False, server_default=_NOW),
    PrimaryKeyConstraint("tenant_id", "digest"),
)
"""Observation bytes and version texts by digest: the one store content lives in."""

tokens = Table(
    "tokens",
    metadata,
    _tenant(),
    Column("token_digest", Text, primary_key=True),
    Column("token_id", Uuid, nullable=False),
    Column("principal_id", Uuid, nullable=False),
    Column("principal_name", Text, nullable=False),
    Column("role", Text, nullable=False),
    UniqueConstraint("token_id", name="tokens_token_id_key"),
    CheckConstraint("role IN ('reader', 'writer', 'admin')", name="tokens_role_check"),
)
"""Bearer tokens by digest (the secret is never stored)."""

review_sessions = Table(
    "review_sessions",
    metadata,
    _tenant(),
    Column("session_digest", LargeBinary, nullable=False),
    Column("sealed_token", LargeBinary, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("seen_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("tenant_id", "session_digest"),
)
"""The review page's sign-ins, by the digest of their cookie's secret; the token is
sealed under that secret (``api/_sessions.py``)."""

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    _tenant(),
    Column("principal_id", Uuid, nullable=False),
    Column("key", Text, nullable=False),
    Column("request_digest", Text, nullable=False),
    Column("status_code", Integer, nullable=False),
    Column("response", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=_NOW),
    PrimaryKeyConstraint("tenant_id", "principal_id", "key"),
)
"""The recorded response of each principal's ``Idempotency-Key``."""

revisions = Table(
    "revisions",
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("requested", BigInteger, nullable=False),
    Column("published", BigInteger, nullable=False, server_default=text("0")),
    Column("requested_at", DateTime(timezone=True), nullable=False, server_default=_NOW),
    Column("claimed_until", DateTime(timezone=True)),
    Column("published_at", DateTime(timezone=True)),
    Column("indexed", BigInteger, nullable=False, server_default=text("0")),
    Column("unprojectable_at", BigInteger),
    Column("unprojectable_error", Text),
    PrimaryKeyConstraint("tenant_id", "memory_id"),
    CheckConstraint("published <= requested", name="revisions_check"),
    Index("revisions_dirty", "requested", postgresql_where=text("published < requested")),
    Index("revisions_tenant_id_published_at_idx", "tenant_id", "published_at"),
    Index(
        "revisions_unindexed",
        "tenant_id",
        "published",
        postgresql_where=text("indexed < published"),
    ),
    Index(
        "revisions_unprojectable",
        "tenant_id",
        postgresql_where=text("unprojectable_at = requested"),
    ),
)
"""The watermark: each memory's requested and published revision (and indexed one), and
the requested revision the drain could not project, with why (quarantine)."""

memory_links = Table(
    "memory_links",
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("linked_id", Uuid, nullable=False),
    Column("kind", Text, nullable=False),
    Column("outgoing", Boolean, nullable=False),
    Column("edge_id", Uuid, nullable=False),
    Column("position", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant_id", "memory_id", "edge_id"),
)
"""Edges between memories, once from each end (a dependency row)."""

evidence_links = Table(
    "evidence_links",
    metadata,
    _tenant(),
    Column("observation_id", Uuid, nullable=False),
    Column("memory_id", Uuid, nullable=False),
    Column("position", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant_id", "observation_id", "memory_id"),
    Index("evidence_links_tenant_id_memory_id_idx", "tenant_id", "memory_id"),
)
"""Which memories cite which observations (a dependency row)."""

memory_index = Table(
    "memory_index",
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("memory_type", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("project", Text),
    Column("topic", Text),
    Column("position", BigInteger, nullable=False),
    Column("erased_position", BigInteger),
    PrimaryKeyConstraint("tenant_id", "memory_id"),
    Index("memory_index_tenant_id_position_idx", "tenant_id", text("position DESC")),
)
"""A memory's immutable attributes, written with ``MemoryCreated``, for listings."""

observation_deadlines = Table(
    "observation_deadlines",
    metadata,
    _tenant(),
    Column("observation_id", Uuid, nullable=False),
    Column("digest", Text, nullable=False),
    Column("deadline", DateTime(timezone=True), nullable=False),
    Column("expired_position", BigInteger),
    Column("transient", Boolean, nullable=False, server_default=text("false")),
    Column("erased_position", BigInteger),
    PrimaryKeyConstraint("tenant_id", "observation_id"),
    Index(
        "observation_deadlines_due",
        "tenant_id",
        "deadline",
        postgresql_where=text("expired_position IS NULL"),
    ),
    Index("observation_deadlines_tenant_id_digest_idx", "tenant_id", "digest"),
)
"""Retention deadlines fixed at capture, and the writes that expired or erased bytes."""

version_digests = Table(
    "version_digests",
    metadata,
    _tenant(),
    Column("digest", Text, nullable=False),
    Column("memory_id", Uuid, nullable=False),
    Column("released_position", BigInteger),
    PrimaryKeyConstraint("tenant_id", "digest", "memory_id"),
)
"""Digests that memory versions hold, so expiry never deletes shared bytes."""

proposer_links = Table(
    "proposer_links",
    metadata,
    _tenant(),
    Column("proposer_id", Uuid, nullable=False),
    Column("model_id", Text, nullable=False),
    Column("memory_id", Uuid, nullable=False),
    Column("position", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant_id", "proposer_id", "model_id", "memory_id"),
)
"""Which proposers (and models) support which memories (a dependency row)."""

beliefs = Table(
    "beliefs",
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("memory_type", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("project", Text),
    Column("topic", Text),
    Column("current_version_id", Uuid),
    Column("grade", Text, nullable=False),
    Column("belief", JSONB, nullable=False),
    PrimaryKeyConstraint("tenant_id", "memory_id"),
    Index(
        "beliefs_tenant_id_memory_type_scope_project_memory_id_idx",
        "tenant_id",
        "memory_type",
        "scope",
        "project",
        "memory_id",
    ),
)
"""The read model of current beliefs, written only by drains."""

revision_tenants = Table(
    "revision_tenants",
    metadata,
    Column("tenant_id", Uuid, primary_key=True),
    Column("marked_position", BigInteger, nullable=False),
    Column("drained_position", BigInteger, nullable=False, server_default=text("0")),
    Index(
        "revision_tenants_due",
        "tenant_id",
        postgresql_where=text("marked_position > drained_position"),
    ),
    Index("revision_tenants_marked_position_idx", "marked_position"),
)
"""Which tenants may have dirty memories: ids and positions only, no tenant data."""

tenant_work = Table(
    "tenant_work",
    metadata,
    Column("tenant_id", Uuid, primary_key=True),
    Column("expiry_due_at", DateTime(timezone=True)),
    Column("retention_marked", BigInteger, nullable=False, server_default=text("0")),
    Column("retention_done", BigInteger, nullable=False, server_default=text("0")),
    Column("deletion_marked", BigInteger, nullable=False, server_default=text("0")),
    Column("deletion_done", BigInteger, nullable=False, server_default=text("0")),
    Index("tenant_work_expiry_due_at_idx", "expiry_due_at"),
    Index(
        "tenant_work_retention_due",
        "tenant_id",
        postgresql_where=text("retention_marked > retention_done"),
    ),
    Index(
        "tenant_work_deletion_due",
        "tenant_id",
        postgresql_where=text("deletion_marked > deletion_done"),
    ),
)
"""Which tenants have expiry, retention or deletion work due (ids, times and
positions only, no tenant data), so a sweep reads only those tenants: the earliest
deadline not yet expired, and per kind the last write that marked the tenant and
the mark a drain saw before it found nothing left."""

index_tenants = Table(
    "index_tenants",
    metadata,
    Column("tenant_id", Uuid, primary_key=True),
    Column("marked", BigInteger, nullable=False, server_default=text("0")),
    Column("indexed", BigInteger, nullable=False, server_default=text("0")),
    Column("published_at", DateTime(timezone=True)),
    Index("index_tenants_due", "tenant_id", postgresql_where=text("marked > indexed")),
    Index("index_tenants_published_at_idx", "published_at"),
)
"""Which tenants have published beliefs recall has not indexed: a count of
publishes (``marked``), the count the indexing drain saw before it found nothing
left (``indexed``), and the time of the last publish (for throughput metrics)."""

decision_index = Table(
    "decision_index",
    metadata,
    _tenant(),
    Column("decision_id", Uuid, nullable=False),
    Column("kind", Text, nullable=False),
    Column("logical_key", Text, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("part_of", Uuid),
    PrimaryKeyConstraint("tenant_id", "decision_id"),
    Index(
        "decision_index_tenant_id_logical_key_position_idx",
        "tenant_id",
        "logical_key",
        text("position DESC"),
    ),
    Index(
        "decision_index_tenant_id_part_of_idx",
        "tenant_id",
        "part_of",
        postgresql_where=text("part_of IS NOT NULL"),
    ),
)
"""Each decision's logical key, so a replayed decision finds the original."""

retention_proposals = Table(
    "retention_proposals",
    metadata,
    _tenant(),
    Column("proposal_id", Uuid, nullable=False),
    Column("memory_id", Uuid, nullable=False),
    Column("related_memory_id", Uuid),
    Column("action", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("probability", Float),
    Column("model", Text, nullable=False),
    Column("run_id", Uuid, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("decision_id", Uuid),
    Column("decided_at", DateTime(timezone=True)),
    Column("decided_position", BigInteger),
    Column("effect", Text),
    Column("source_ids", ARRAY(Uuid), nullable=False),
    PrimaryKeyConstraint("tenant_id", "proposal_id"),
    CheckConstraint(
        "action IN ('keep', 'archive', 'supersede', 'conflict', 'merge', 'decay')",
        name="retention_proposals_action",
    ),
    CheckConstraint(
        "status IN ('proposed', 'applied', 'rejected', 'dismissed')",
        name="retention_proposals_status",
    ),
    CheckConstraint(
        "(action IN ('supersede', 'conflict')) = (related_memory_id IS NOT NULL)",
        name="retention_proposals_related",
    ),
    Index(
        "retention_proposals_open",
        "tenant_id",
        "memory_id",
        "action",
        unique=True,
        postgresql_where=text("status = 'proposed'::text"),
    ),
    Index("retention_proposals_review", "tenant_id", "status", text("position DESC")),
    Index("retention_proposals_memory", "tenant_id", "memory_id"),
    Index("retention_proposals_source_ids_idx", "source_ids", postgresql_using="gin"),
)
"""The forgetting pass's proposals, one row per ``RetentionProposed``: the details
stay in the event; at most one open proposal per memory and action. ``source_ids``
are the memories it saw (a merge's sources), so an erasure finds the merge texts
drawn from what it erases."""

reflections = Table(
    "reflections",
    metadata,
    _tenant(),
    Column("reflection_id", Uuid, nullable=False),
    Column("scope", Text, nullable=False),
    Column("project", Text),
    Column("model", Text, nullable=False),
    Column("content_digest", Text, nullable=False),
    Column("source_ids", ARRAY(Uuid), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("redacted_position", BigInteger),
    PrimaryKeyConstraint("tenant_id", "reflection_id"),
    Index("reflections_tenant_id_position_idx", "tenant_id", text("position DESC")),
    Index("reflections_source_ids_idx", "source_ids", postgresql_using="gin"),
)
"""Consolidation's reflections, one row per ``ReflectionRecorded`` (redacted once a
source is erased), written in the event's transaction; kept apart from memories."""

judge_usage = Table(
    "judge_usage",
    metadata,
    _tenant(),
    Column("day", Date, nullable=False),
    Column("calls", Integer, nullable=False, server_default=text("0")),
    Column("tokens", BigInteger, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("tenant_id", "day"),
    CheckConstraint("calls >= 0 AND tokens >= 0", name="judge_usage_check"),
)
"""Each tenant's judge calls and tokens per UTC day: the forgetting pass's budget."""

archival_allowance = Table(
    "archival_allowance",
    metadata,
    _tenant(),
    Column("day", Date, nullable=False),
    Column("archived", BigInteger, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("tenant_id", "day"),
    CheckConstraint("archived >= 0", name="archival_allowance_check"),
)
"""Each tenant's memories archived per UTC day by applied proposals, the decay cycle and
consolidation: the collapse guard's allowance, reserved in each such write's
transaction (:mod:`palimpsest.projections.store.archival_allowance`)."""

forgetting_runs = Table(
    "forgetting_runs",
    metadata,
    Column("day", Date, primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("held_until", DateTime(timezone=True)),
)
"""One row per day the scheduled forgetting pass was claimed (days only, no tenant
data): a scheduler that claims it runs that day's pass, holding the claim until
``held_until``; a claim neither finished nor held any longer is claimed again."""

drain_heartbeats = Table(
    "drain_heartbeats",
    metadata,
    Column("drain", Text, primary_key=True),
    Column("worker", Text, nullable=False),
    Column("beat_at", DateTime(timezone=True), nullable=False),
)
"""When each drain (a dramatiq actor) last completed a pass, and on which worker (no
tenant data): ``/readyz`` with external drains reads it
(:mod:`palimpsest.projections.drains.heartbeat`)."""

decay_cycles = Table(
    "decay_cycles",
    metadata,
    _tenant(),
    Column("cycle_id", Uuid, nullable=False),
    Column("snapshot_at", DateTime(timezone=True), nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("report", JSONB, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("consolidation", JSONB),
    PrimaryKeyConstraint("tenant_id", "cycle_id"),
    Index("decay_cycles_recent", "tenant_id", text("position DESC")),
)
"""One row per ``CycleCompleted``: the decay cycle's report, as its event records it,
and what consolidating its survivors did, as ``CycleConsolidated`` records it (null
until then)."""

memory_fades = Table(
    "memory_fades",
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("cycle_id", Uuid, nullable=False),
    Column("faded_at", DateTime(timezone=True)),
    Column("position", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant_id", "memory_id"),
)
"""The fade label: the snapshot time of the cycle that faded each memory (NULL once a
later cycle kept it); an access after it, or a pin, clears it at read time."""

decay_cycle_claims = Table(
    "decay_cycle_claims",
    metadata,
    Column("tenant_id", Uuid, nullable=False),
    Column("slot", DateTime(timezone=True), nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("tenant_id", "slot"),
)
"""One row per tenant and scheduled slot of the decay cycle (ids and times only): the
first scheduler to insert it runs that slot's cycle."""

snapshots = Table(
    SNAPSHOTS_TABLE,
    metadata,
    _tenant(),
    Column("originator_id", Uuid, nullable=False),
    Column("originator_version", BigInteger, nullable=False),
    Column("topic", Text, nullable=False),
    Column("state", LargeBinary, nullable=False),
    PrimaryKeyConstraint("originator_id", "originator_version"),
)
"""The library's snapshot layout with each row's tenant (derived from the log)."""

memory_access = Table(
    "memory_access",
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("accesses", BigInteger, nullable=False),
    Column("last_access", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("tenant_id", "memory_id"),
)
"""Tuning state for salience: how often and when reads returned each memory."""

tenant_retention = Table(
    "tenant_retention",
    metadata,
    _tenant(primary_key=True),
    Column("raw_hours", Integer, nullable=False),
    Column("transient_hours", Integer, nullable=False),
    Column("position", BigInteger, nullable=False),
)
"""The retention a tenant set (``RetentionSet``), as of the write that set it."""

tenant_deletions = Table(
    "tenant_deletions",
    metadata,
    _tenant(primary_key=True),
    Column("decision_id", Uuid, nullable=False),
    Column("requested_position", BigInteger, nullable=False),
    Column("completed_position", BigInteger),
)
"""A tenant deletion in progress (``completed_position`` NULL) or done."""

memory_embeddings = Table(
    EMBEDDINGS_TABLE,
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("model_id", Text, nullable=False),
    Column("dimension", Integer, nullable=False),
    Column("version_id", Uuid, nullable=False),
    Column("content_digest", Text, nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("memory_type", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("project", Text),
    Column("embedding", Vector(), nullable=False),
    Column("embedded_at", DateTime(timezone=True), nullable=False, server_default=_NOW),
    PrimaryKeyConstraint("tenant_id", "memory_id", "model_id"),
    CheckConstraint("vector_dims(embedding) = dimension", name="memory_embeddings_check"),
    Index(
        "memory_embeddings_tenant_id_model_id_memory_type_scope_proj_idx",
        "tenant_id",
        "model_id",
        "memory_type",
        "scope",
        "project",
    ),
    Index("memory_embeddings_version_id_idx", "version_id"),
    Index("memory_embeddings_tenant_id_model_id_project_idx", "tenant_id", "model_id", "project"),
    Index("memory_embeddings_tenant_id_model_id_scope_idx", "tenant_id", "model_id", "scope"),
    # Recall's project_under: a prefix is a range whatever the collation (0023).
    Index(
        "memory_embeddings_tenant_id_model_id_project_pattern_idx",
        "tenant_id",
        "model_id",
        "project",
        postgresql_ops={"project": "text_pattern_ops"},
    ),
)
"""Recall's vectors (derived, like a cache). The HNSW index per dimension is made by
:func:`vector_index_ddl` (one partial expression index per model dimension)."""

TEXT_SEARCH_CONFIG = "english"
"""The text search configuration of :data:`memory_texts` and of recall's text queries:
stop words dropped and words stemmed (no IDF in PostgreSQL's ranking, so "my" and "the"
would otherwise match everything), while numbers, hyphenated identifiers ("PAL-123"),
versions, hosts and addresses are kept whole (docs/recall.md says why not ``simple``)."""

memory_texts = Table(
    "memory_texts",
    metadata,
    _tenant(),
    Column("memory_id", Uuid, nullable=False),
    Column("version_id", Uuid, nullable=False),
    Column("content_digest", Text, nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("memory_type", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("project", Text),
    Column("document", TSVECTOR, nullable=False),
    Column("indexed_at", DateTime(timezone=True), nullable=False, server_default=_NOW),
    # The memory's time (domain/memory_time.py), for the months a query names (0027).
    Column("memory_time", DateTime(timezone=True)),
    PrimaryKeyConstraint("tenant_id", "memory_id"),
    Index("memory_texts_document_idx", "document", postgresql_using="gin"),
    Index("memory_texts_version_id_idx", "version_id"),
    Index(
        "memory_texts_tenant_id_memory_type_scope_project_idx",
        "tenant_id",
        "memory_type",
        "scope",
        "project",
    ),
    Index("memory_texts_tenant_id_project_idx", "tenant_id", "project"),
    Index("memory_texts_tenant_id_scope_idx", "tenant_id", "scope"),
    Index(
        "memory_texts_tenant_id_project_pattern_idx",
        "tenant_id",
        "project",
        postgresql_ops={"project": "text_pattern_ops"},
    ),
)
"""Recall's words: the lexemes of each memory's current version, and the memory's time
(derived, like the vectors: the indexing drain writes them, erasure deletes them with
the version)."""

memory_lexemes = Table(
    "memory_lexemes",
    metadata,
    _tenant(),
    Column("lexeme", Text, nullable=False),
    Column("memory_id", Uuid, nullable=False),
    Column("occurrences", SmallInteger, nullable=False),
    # The occurrences ride in the key's index, so a search reads them without the heap.
    PrimaryKeyConstraint("tenant_id", "lexeme", "memory_id", postgresql_include=["occurrences"]),
    Index("memory_lexemes_tenant_id_memory_id_idx", "tenant_id", "memory_id"),
)
"""Recall's words inverted: one row per lexeme of :data:`memory_texts`' documents, with
how many positions the document holds it at (``occurrences``). Text equality is
leakproof, so this btree serves text search under row-level security, where the GIN
index cannot (``@@`` is not leakproof); the occurrences let a search score a memory
without reading its document (:mod:`palimpsest.projections.recall._words`). Kept and erased with
``memory_texts``."""


conflict_marks = Table(
    "conflict_marks",
    metadata,
    _tenant(),
    Column("older_id", Uuid, nullable=False),
    Column("newer_id", Uuid, nullable=False),
    Column("similarity", Float, nullable=False),
    Column("overlap", Float),
    PrimaryKeyConstraint("tenant_id", "older_id", "newer_id"),
    Index("conflict_marks_tenant_id_newer_id_idx", "tenant_id", "newer_id"),
)
"""Recall's possible supersessions: pairs of memories of one type, scope and project
(decision, preference, fact) about the same thing (their similarity and the share of
their rare words they hold in common, ``overlap``), oriented by which version was indexed
later. Derived, like the vectors it is computed from: the indexing drain rewrites a
memory's pairs whenever it handles the memory, and recall reads them
(:mod:`palimpsest.projections.recall._conflict_marks`)."""

lexeme_counts = Table(
    "lexeme_counts",
    metadata,
    _tenant(),
    Column("lexeme", Text, nullable=False),
    Column("memories", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant_id", "lexeme"),
)
"""How many memories hold each lexeme in :data:`memory_lexemes`, by tenant; the empty
lexeme (never one of a document's) counts the memories holding any. Written in the
statements that write ``memory_lexemes``, so text search can tell a word most memories
hold from a rare one without counting its rows; a count that reaches zero is deleted
there (its key is the word: an erased memory's words must not stay)."""


def vector_index_ddl(schema: str, dimension: int) -> sql.Composed:
    """Return the DDL of the HNSW (cosine) index for vectors of ``dimension``.

    Vectors of every model live in one untyped column; each dimension gets a
    partial expression index, so a new model can be indexed beside the old one
    while reads go on. ``m = 8, ef_construction = 32`` (pgvector's defaults are
    16 and 64) halve the cost of each insert, which was a third of the indexing
    drain's time at 10,000 memories; recall holds it up at query time with a
    larger ``ef_search`` (docs/benchmarks.md has both measurements).

    Revision 0008 creates the 384-dimension one; ``ensure_vector_index`` the
    others, at runtime, so they are not part of :data:`metadata`.
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
