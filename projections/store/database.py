"""Connection targets: the owner (migrations, admin) and the runtime role."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from palimpsest.projections.store.embedded import EmbeddedServer, start_embedded
from palimpsest.projections.store.errors import DatabaseUnavailableError, PgvectorMissingError
from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["Database", "open_database"]

_EMBEDDED_DBNAME = "palimpsest"


@dataclass(frozen=True)
class Database:
    """Where palimpsest's database is, and as whom to connect."""

    host: str
    port: int
    dbname: str
    owner_user: str
    owner_password: str
    app_user: str
    app_password: str
    schema: str
    embedded: EmbeddedServer | None = None

    def owner_conninfo(self, dbname: str | None = None) -> dict[str, str | int]:
        """Return connection parameters for the owner role."""
        return {
            "host": self.host,
            "port": self.port,
            "dbname": dbname or self.dbname,
            "user": self.owner_user,
            "password": self.owner_password,
        }

    @contextmanager
    def owner_connection(
        self, *, autocommit: bool = False
    ) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """Yield a connection as the owner role.

        Raises:
            DatabaseUnavailableError: the server refused or could not be reached.
        """
        try:
            conn = psycopg.connect(
                make_conninfo("", **self.owner_conninfo()),
                autocommit=autocommit,
                connect_timeout=10,
            )
        except psycopg.OperationalError as e:
            msg = f"cannot connect to PostgreSQL at {self.host}:{self.port}/{self.dbname}: {e}"
            raise DatabaseUnavailableError(msg.strip()) from e
        with conn:
            yield conn

    def event_store_env(self, settings: DatabaseSettings) -> dict[str, str]:
        """Return the eventsourcing environment for the runtime role."""
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "APPLICATION_RECORDER_TOPIC": (
                "palimpsest.projections.store.eventlog:TenantScopedRecorder"
            ),
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": str(self.port),
            "POSTGRES_DBNAME": self.dbname,
            "POSTGRES_USER": self.app_user,
            "POSTGRES_PASSWORD": self.app_password,
            "POSTGRES_SCHEMA": self.schema,
            "POSTGRES_POOL_SIZE": str(settings.db_pool_size),
            "POSTGRES_MAX_OVERFLOW": str(settings.db_max_overflow),
            "POSTGRES_LOCK_TIMEOUT": str(settings.db_lock_timeout_s),
            # The pool's wait for a connection: during an outage, each read
            # and each write attempt gives up after this long.
            "POSTGRES_CONNECT_TIMEOUT": str(settings.db_wait_s),
            # No pre-ping: it costs a round trip per checkout, and the library
            # already retries a write that meets a dead connection.
            "POSTGRES_PRE_PING": "no",
            # Never on: with it, a log follower can skip events (research §6.1).
            "POSTGRES_ENABLE_DB_FUNCTIONS": "no",
            # Migrations create tables; the runtime role may not.
            "CREATE_TABLE": "no",
        }


def open_database(settings: DatabaseSettings) -> Database:
    """Resolve (and for the embedded default, start) the configured database.

    Raises:
        DatabaseUnavailableError: the server cannot be started or reached.
        PgvectorMissingError: the server has no pgvector extension available.
    """
    app_password = settings.db_app_password.get_secret_value() if settings.db_app_password else ""
    if settings.database_url is None:
        server = start_embedded(settings.data_dir, settings.embedded_shared_buffers_mb)
        database = Database(
            host=server.socket_dir,
            port=server.port,
            dbname=_EMBEDDED_DBNAME,
            owner_user="postgres",
            owner_password="",
            app_user=settings.db_app_role,
            app_password=app_password,
            schema=settings.db_schema,
            embedded=server,
        )
        _ensure_embedded_database(database)
    else:
        url = settings.database_url.get_secret_value()
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as e:
            msg = f"DATABASE_URL is not a valid PostgreSQL URL: {e}"
            raise DatabaseUnavailableError(msg) from e
        database = Database(
            host=str(params.get("host") or "localhost"),
            port=int(params.get("port") or 5432),
            dbname=str(params.get("dbname") or params.get("user") or "postgres"),
            owner_user=str(params.get("user") or "postgres"),
            owner_password=str(params.get("password") or ""),
            app_user=settings.db_app_role,
            app_password=app_password,
            schema=settings.db_schema,
        )
    _check_pgvector(database)
    return database


def _ensure_embedded_database(database: Database) -> None:
    maintenance = replace(database, dbname="postgres")
    with maintenance.owner_connection(autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (database.dbname,)
        ).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database.dbname)))


def _check_pgvector(database: Database) -> None:
    with database.owner_connection() as conn:
        row = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    if row is None:
        msg = (
            f"PostgreSQL at {database.host}:{database.port} has no pgvector extension; "
            "install pgvector on that server, or unset DATABASE_URL to use the embedded default"
        )
        raise PgvectorMissingError(msg)
