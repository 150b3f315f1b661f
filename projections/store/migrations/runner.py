"""Forward-only schema migrations (Alembic revisions), run as the owner role.

Migrations run before any application or worker connects (``palimpsest
migrate``, and ``palimpsest serve`` at start): DDL on the events table under a
running application breaks its prepared ``SELECT *`` statements until the
connections are recycled (research/eventsourcing.md §6.3).

Each revision runs in its own transaction, while this process holds an
advisory lock, so two processes migrating at once apply each step exactly
once. Alembic's version table lives in the configured schema.

A store migrated before Alembic has a ``schema_migrations`` ledger of
versions 1 to 9, each the step revision ``0001`` to ``0009`` repeats exactly: it is
stamped with the matching revision and the ledger is dropped, in one
transaction, and the newer revisions then run as on any store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool
from sqlalchemy.schema import CreateSchema, DropTable

from palimpsest.projections.store.errors import DatabaseUnavailableError, SchemaTooNewError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from palimpsest.projections.store.database import Database

__all__ = ["alembic_config", "migrate", "schema_version"]

_SCRIPTS = Path(__file__).resolve().parent
"""This package: Alembic's script location (``env.py``, and ``versions/``)."""

_ADVISORY_LOCK_KEY = 0x70616C696D  # "palim"

_LEGACY_LEDGER = "schema_migrations"
"""The ledger of the runner before Alembic: one row per applied version, 1 to 9."""

_LEGACY_NEWEST = 9


@contextmanager
def alembic_config(database: Database) -> Iterator[Config]:
    """Yield Alembic's configuration, bound to one owner connection to ``database``.

    Alembic commands given this configuration (``command.upgrade``,
    ``command.check``…) run on that connection, in ``database.schema``; no
    ``alembic.ini`` is involved.

    Raises:
        DatabaseUnavailableError: the server refused or could not be reached.
    """
    with database.owner_connection() as driver:
        engine = sa.create_engine(
            "postgresql+psycopg://", creator=lambda: driver, poolclass=StaticPool
        )
        try:
            with engine.connect() as connection:
                config = Config()
                config.set_main_option("script_location", str(_SCRIPTS))
                config.attributes["connection"] = connection
                config.attributes["database"] = database
                yield config
        except DBAPIError as e:
            msg = f"migrating {database.host}:{database.port}/{database.dbname} failed: {e.orig}"
            raise DatabaseUnavailableError(msg.strip()) from e
        finally:
            engine.dispose()


def _current_revisions(
    connection: Connection, script: ScriptDirectory, schema: str
) -> tuple[str, ...]:
    """Return the revisions the store is at (none for a new store).

    Raises:
        SchemaTooNewError: a revision this code does not know.
    """
    context = MigrationContext.configure(connection, opts={"version_table_schema": schema})
    heads = context.get_current_heads()
    connection.commit()
    known = {revision.revision for revision in script.walk_revisions()}
    unknown = sorted(set(heads) - known)
    if unknown:
        msg = (
            f"database schema revision {', '.join(unknown)} is newer than this palimpsest "
            f"knows ({script.get_current_head()}); upgrade palimpsest"
        )
        raise SchemaTooNewError(msg)
    return heads


def _legacy_version(connection: Connection, schema: str) -> int | None:
    """Return the newest version in the ledger before Alembic (None if no ledger)."""
    if not sa.inspect(connection).has_table(_LEGACY_LEDGER, schema=schema):
        return None
    ledger = sa.table(_LEGACY_LEDGER, sa.column("version"), schema=schema)
    return int(connection.execute(sa.select(sa.func.max(ledger.c.version))).scalar() or 0)


def _adopt_legacy_ledger(connection: Connection, script: ScriptDirectory, schema: str) -> None:
    """Stamp a store migrated before Alembic with its revision, and drop its ledger.

    The ledger goes: ``alembic_version`` is the one record of the schema's
    version from now on, and a fresh store never had a ledger. Both happen
    in one transaction, so a store is either adopted or untouched.

    Raises:
        SchemaTooNewError: the ledger has a version newer than the last one it knew.
    """
    with connection.begin():
        version = _legacy_version(connection, schema)
        if version is None:
            return
        if version > _LEGACY_NEWEST:
            msg = (
                f"database schema version {version} is newer than this palimpsest "
                f"knows ({_LEGACY_NEWEST}); upgrade palimpsest"
            )
            raise SchemaTooNewError(msg)
        context = MigrationContext.configure(connection, opts={"version_table_schema": schema})
        if version and not context.get_current_heads():
            context.stamp(script, f"{version:04d}")
        connection.execute(DropTable(sa.Table(_LEGACY_LEDGER, sa.MetaData(), schema=schema)))


def schema_version(database: Database) -> str | None:
    """Return the newest revision applied to ``database`` (None when none).

    A store not yet adopted from the ledger before Alembic reports the
    revision its newest version matches.
    """
    with alembic_config(database) as config:
        connection: Connection = config.attributes["connection"]
        script = ScriptDirectory.from_config(config)
        legacy = _legacy_version(connection, database.schema)
        heads = _current_revisions(connection, script, database.schema)
    if heads:
        return max(heads)
    return f"{legacy:04d}" if legacy else None


def migrate(database: Database, progress: Callable[[str], None] | None = None) -> list[str]:
    """Apply every revision newer than the database's, in order (``alembic upgrade head``).

    Returns:
        The revisions applied by this call, oldest first (empty when already current).

    Raises:
        SchemaTooNewError: the database has a revision this code does not know.
        DatabaseUnavailableError: a revision failed; nothing of it was applied.
    """
    applied: list[str] = []
    schema = database.schema
    with alembic_config(database) as config:
        connection: Connection = config.attributes["connection"]
        script = ScriptDirectory.from_config(config)
        # A session lock, held across the revisions' transactions; it goes
        # with the connection if this process dies.
        connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})
        try:
            # Alembic's version table lives in the schema, so it exists first.
            connection.execute(CreateSchema(schema, if_not_exists=True))
            connection.commit()
            _adopt_legacy_ledger(connection, script, schema)
            current = _current_revisions(connection, script, schema)
            pending = reversed(list(script.iterate_revisions("heads", current or "base")))
            for revision in pending:
                if progress is not None:
                    progress(f"applying revision {revision.revision}: {revision.doc}")
                try:
                    command.upgrade(config, revision.revision)
                except (DBAPIError, psycopg.Error) as e:
                    cause = e.orig if isinstance(e, DBAPIError) else e
                    msg = f"revision {revision.revision} ({revision.doc}) failed: {cause}"
                    raise DatabaseUnavailableError(msg.strip()) from e
                applied.append(revision.revision)
        finally:
            # A broken connection took the lock with it; the error that broke
            # it is the one to report.
            with suppress(DBAPIError):
                connection.rollback()
                connection.execute(
                    sa.text("SELECT pg_advisory_unlock(:key)"), {"key": _ADVISORY_LOCK_KEY}
                )
                connection.commit()
    return applied
