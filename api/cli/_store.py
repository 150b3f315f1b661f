"""Whether the store a command names is there: only ``serve`` and ``migrate`` create one.

A typo in ``--data-dir`` (or a ``DATABASE_URL`` naming the wrong database) must
not leave a new, empty store behind it, its migrations applied: every other
verb asks first, and refuses one that is not there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palimpsest.projections.store.database import open_database
from palimpsest.projections.store.migrations import schema_version

if TYPE_CHECKING:
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["missing_store"]

_CLUSTER_MARK = ("pgdata", "PG_VERSION")
"""What initdb writes into a data directory's cluster (``pgdata/``, as
:mod:`palimpsest.projections.store.embedded` lays it out), and nothing else does."""


def missing_store(db: DatabaseSettings) -> str | None:
    """Return why ``db`` names no store (None: there is one), having created nothing.

    An embedded data directory holds one once initdb made its cluster there; it
    is opened (the embedded server started) only then, to see the schema. A
    ``DATABASE_URL`` database holds one once it has palimpsest's schema.

    Raises:
        DatabaseUnavailableError: the database cannot be started or reached.
        SchemaTooNewError: a newer palimpsest migrated it.
    """
    if db.embedded and not db.data_dir.joinpath(*_CLUSTER_MARK).is_file():
        return (
            f"{db.data_dir} holds no palimpsest store: check --data-dir (or "
            "PALIMPSEST_DATA_DIR), or create one there with palimpsest migrate (or serve)"
        )
    database = open_database(db)
    if schema_version(database) is not None:
        return None
    where = (
        f"the data directory {db.data_dir}"
        if db.embedded
        else f"the database {database.host}:{database.port}/{database.dbname}"
    )
    return (
        f"{where} has no palimpsest schema {database.schema!r}: check DATABASE_URL and "
        "PALIMPSEST_DB_SCHEMA, or create it with palimpsest migrate (or serve)"
    )
