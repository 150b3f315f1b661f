"""One process's connection to palimpsest's database and event log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eventsourcing.persistence import PersistenceError

from projections.database import Database, open_database
from projections.errors import DatabaseUnavailableError
from projections.eventlog import EventLog
from projections.migrations import migrate
from projections.settings import DatabaseSettings

__all__ = ["Runtime", "start_runtime"]


@dataclass
class Runtime:
    """The database (embedded or external) and the event log of this process."""

    database: Database
    log: EventLog

    def close(self) -> None:
        """Close the event log's connection pool (the embedded server stops at exit)."""
        self.log.close()


def start_runtime(
    settings: DatabaseSettings, *, progress: Callable[[str], None] | None = None
) -> Runtime:
    """Open the database, apply migrations, then open the event log.

    Migrations run before the event log connects, so no prepared statement
    ever sees the schema change under it.

    Raises:
        DatabaseUnavailableError, PgvectorMissingError, SchemaTooNewError.
    """
    database = open_database(settings)
    migrate(database, progress)
    try:
        log = EventLog(env=database.event_store_env(settings))
    except PersistenceError as e:
        msg = f"cannot open the event log as role {database.app_user}: {e}"
        raise DatabaseUnavailableError(msg) from e
    return Runtime(database, log)
