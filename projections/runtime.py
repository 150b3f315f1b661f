"""One process's connection to palimpsest's database and event log."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from eventsourcing.persistence import PersistenceError

from palimpsest.projections.recall.embedders import Embedder
from palimpsest.projections.recall.index_erasure import IndexErasure
from palimpsest.projections.recall.settings import EmbeddingSettings
from palimpsest.projections.store.database import Database, open_database
from palimpsest.projections.store.errors import DatabaseUnavailableError, EmbedderUnavailableError
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.migrations import migrate
from palimpsest.projections.store.schema import vector_index_ddl
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.store.table_writers import TableWriter
from palimpsest.projections.views.access_buffer import close_access_buffer
from palimpsest.projections.views.publications import PublicationWatch
from palimpsest.projections.views.table_writers import VIEW_WRITERS
from palimpsest.projections.views.version_cache import VersionCache, cache_for

__all__ = [
    "Runtime",
    "ensure_vector_index",
    "start_runtime",
    "table_writers",
]

_log = logging.getLogger(__name__)

_RECALL_WRITERS: tuple[TableWriter, ...] = (IndexErasure(),)


def table_writers() -> tuple[TableWriter, ...]:
    """Return the tables every event log keeps in step with the log, in the order a
    write runs them: the views room's read models, then recall's indexes of erased
    content. Every ``EventLog`` of the service is made with these (it takes them as
    a required argument), so no process writes fewer."""
    return (*VIEW_WRITERS, *_RECALL_WRITERS)


@dataclass
class Runtime:
    """The database (embedded or external) and the event log of this process."""

    database: Database
    log: EventLog
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    _embedder: Embedder | None = None
    _publications: PublicationWatch | None = None
    embedder_load_ended: threading.Event | None = None
    """:meth:`load_embedder_soon`'s load, set once it ended, loaded or not (None: no
    such load was started). A wait for the caller's writes to be indexed first waits
    for it: the drains index nothing before the model has loaded."""
    embedder_loaded: threading.Event = field(default_factory=threading.Event)
    """Set once :meth:`load_embedder` has embedded with the current embedder
    (readiness: until then the first recall would pay for loading the model)."""
    _embedder_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def embedder(self) -> Embedder:
        """The configured embedder (made on first use; the local model loads on its
        first embedding)."""
        made = self._embedder
        if made is not None:
            return made
        # Made once: serve's loader thread and the drains first ask at the same time,
        # and two embedders would load the model twice, the loader's readiness set
        # on the one that lost (/readyz then answered 503 for good).
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = self.embedding.make_embedder()
            return self._embedder

    @property
    def publications(self) -> PublicationWatch:
        """Publication notices of this process (made on first use; ``create_app``
        starts listening): what waiting reads await instead of polling."""
        if self._publications is None:
            self._publications = PublicationWatch(self.database)
        return self._publications

    @property
    def version_cache(self) -> VersionCache:
        """Decoded memories by version, for as-of reads (``create_app`` sizes it)."""
        return cache_for(self.log)

    def use_embedder(self, embedder: Embedder) -> None:
        """Use ``embedder`` from now on, and make sure its dimension has an index
        (it counts as loaded once :meth:`load_embedder` has run with it)."""
        with self._embedder_lock:
            self.embedder_loaded.clear()
            self._embedder = embedder
        ensure_vector_index(self.database, embedder.dimension)

    def load_embedder(self) -> None:
        """Load the embedder now (one embedding: the local model loads, an endpoint
        answers) and set :attr:`embedder_loaded`.

        Raises:
            EmbedderUnavailableError: the model cannot be loaded or reached.
        """
        embedder = self.embedder
        embedder.embed(["warm up"])
        if embedder is self._embedder:
            self.embedder_loaded.set()

    def load_embedder_soon(self) -> None:
        """Start :meth:`load_embedder` on a daemon thread and return at once, for a
        process that answers before its model has loaded (``palimpsest mcp``, started
        by a desktop client). A model that cannot load is logged; the drains' indexing
        reports it again at each try."""

        ended = self.embedder_load_ended = threading.Event()

        def load() -> None:
            try:
                self.load_embedder()
            except EmbedderUnavailableError:
                _log.warning("the embedding model could not be loaded", exc_info=True)
            finally:
                ended.set()

        threading.Thread(target=load, name="palimpsest-embedder-load", daemon=True).start()

    def close(self) -> None:
        """Stop listening for publications, write the buffered access stamps, and close
        the event log's connection pool (the embedded server stops at exit)."""
        if self._publications is not None:
            self._publications.stop()
        close_access_buffer(self.log)  # the accesses reads stamped, written before closing
        self.log.close()


def ensure_vector_index(database: Database, dimension: int) -> None:
    """Create the HNSW index for vectors of ``dimension``, as the owner, if missing
    (migrations create the 384-dimension one; another model needs its own)."""
    with database.owner_connection(autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '256MB'")
        conn.execute(vector_index_ddl(database.schema, dimension))


def start_runtime(
    settings: DatabaseSettings,
    *,
    progress: Callable[[str], None] | None = None,
    embedding: EmbeddingSettings | None = None,
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
        log = EventLog(env=database.event_store_env(settings), writers=table_writers())
    except PersistenceError as e:
        msg = f"cannot open the event log as role {database.app_user}: {e}"
        raise DatabaseUnavailableError(msg) from e
    embedding = embedding or EmbeddingSettings()
    if embedding.embedding_dimension != 384:
        ensure_vector_index(database, embedding.embedding_dimension)
    return Runtime(database, log, embedding)
