"""The database and what lives in it: where it is, its tables and migrations,
the event log, and the transaction a tenant's work runs in. Imports only
:mod:`domain`.

Modules:

- :mod:`palimpsest.projections.store.aggregate_cache`: The write side's resident
  aggregates: each as last read or written, by tenant and id.
- :mod:`palimpsest.projections.store.aggregates`: Loading aggregates from the log, one or
  many at once, from what this process knows.
- :mod:`palimpsest.projections.store.archival_allowance`: The collapse guard's allowance:
  how many memories a tenant's day may see archived.
- :mod:`palimpsest.projections.store.arrays`: Arrays of a known element type, sent to
  PostgreSQL in binary in one step.
- :mod:`palimpsest.projections.store.database`: Connection targets: the owner (migrations,
  admin) and the runtime role.
- :mod:`palimpsest.projections.store.embedded`: The embedded PostgreSQL (pgserver:
  PostgreSQL 16 + pgvector) in a data directory.
- :mod:`palimpsest.projections.store.errors`: Persistence errors, translated once from
  driver and library exceptions.
- :mod:`palimpsest.projections.store.eventlog`: The event log: the eventsourcing
  application and its tenant-scoped recorder.
- :mod:`palimpsest.projections.store._group_conflicts`: Which writes of a group commit cannot
  share its transaction, decided before it.
- :mod:`palimpsest.projections.store.http_client`: The process's one HTTP client: to
  model servers and, from the CLI, to the service.
- :mod:`palimpsest.projections.store.ids`: Aggregate ids as UUIDs, whatever the event store
  typed them as.
- :mod:`palimpsest.projections.store.lexeme_counts`: Counting recall's words: the statement
  that keeps ``lexeme_counts`` true.
- :mod:`palimpsest.projections.store.migrations`: Schema migrations: Alembic revisions,
  applied by the owner role before anything connects.
- :mod:`palimpsest.projections.store._pipelined`: A transaction sent to PostgreSQL in one
  round trip, ``COMMIT`` included.
- :mod:`palimpsest.projections.store.queued`: A transaction queued in Python, then sent
  through libpq's pipeline in one round trip.
- :mod:`palimpsest.projections.store.resident`: A process's resident copies of what the
  log implies: a bounded, tenant-keyed LRU.
- :mod:`palimpsest.projections.store.rollbacks`: Transactions PostgreSQL rolled back to
  break a deadlock or a serialization conflict: recognised, and tried again at
  once.
- :mod:`palimpsest.projections.store.schema`: Every table the service owns, defined once
  (SQLAlchemy Core).
- :mod:`palimpsest.projections.store.settings`: Where the database is, and how the service
  connects to it.
- :mod:`palimpsest.projections.store.sql`: Running SQLAlchemy Core statements on the
  service's own psycopg connections.
- :mod:`palimpsest.projections.store.storable`: Text PostgreSQL can store, made from text
  the log may hold (U+0000 and lone surrogates become U+FFFD).
- :mod:`palimpsest.projections.store.table_writers`: Tables a feature keeps in step with
  the log, written in each write's transaction by a writer the log is made with.
- :mod:`palimpsest.projections.store.tenancy`: The tenant a unit of work runs for, and the
  transactions that enforce it.
- :mod:`palimpsest.projections.store._transcodings`: How snapshot state that is not plain
  JSON is stored.
- :mod:`palimpsest.projections.store._unknown_commits`: What became of a write whose
  connection failed after its ``COMMIT`` was sent.
- :mod:`palimpsest.projections.store.unreadable`: Events of the log this release cannot
  read, told apart from the ones it can.
- :mod:`palimpsest.projections.store.work_due`: Which tenants have background work due, so
  a sweep reads only those tenants.
"""

from __future__ import annotations

__all__ = [
    "aggregate_cache",
    "aggregates",
    "archival_allowance",
    "arrays",
    "database",
    "embedded",
    "errors",
    "eventlog",
    "http_client",
    "ids",
    "lexeme_counts",
    "migrations",
    "queued",
    "resident",
    "rollbacks",
    "schema",
    "settings",
    "sql",
    "storable",
    "table_writers",
    "tenancy",
    "unreadable",
    "work_due",
]
