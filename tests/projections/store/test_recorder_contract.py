"""The recorder's contract with ``eventsourcing``: what it implements, reads and takes.

:class:`~palimpsest.projections.store._recorder.TenantScopedRecorder` subclasses the
library's ``PostgresApplicationRecorder`` (the snapshot recorder its
``PostgresAggregateRecorder``) and implements the recorder interface the library
calls, ``insert_events`` and ``select_events``, with steps of its own. It relies on
the library for no private hook: these tests fail on an upgrade that changes the
interface's signatures, drops an attribute the recorder reads, takes the events
table's lock in another mode than the recorder does, or adds a name the recorder's
own would silently override.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from eventsourcing.persistence import AggregateRecorder, ApplicationRecorder
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from psycopg import sql

from palimpsest.projections.store._recorder import (
    TenantScopedRecorder,
    TenantScopedSnapshotRecorder,
)

if TYPE_CHECKING:
    from palimpsest.projections.runtime import Runtime

INTERFACE = ("insert_events", "select_events")
"""The recorder interface's methods the recorders implement (every other method of
the library's recorders is theirs, unchanged)."""

PAIRS = [
    (TenantScopedRecorder, PostgresApplicationRecorder),
    (TenantScopedSnapshotRecorder, PostgresAggregateRecorder),
]


def _parameters(function: Callable[..., object]) -> list[tuple[str, object, object]]:
    """Name, kind and default of each parameter (annotations are not compared: the
    library's and ours are strings of their own modules)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize(("ours", "library"), PAIRS)
@pytest.mark.parametrize("name", INTERFACE)
def test_the_recorders_implement_the_interface_with_the_librarys_signatures(
    ours: type, library: type, name: str
) -> None:
    # What the library calls (Application.save, EventStore.put and get) must find
    # the same parameters in ours as in its own.
    interface = ApplicationRecorder if library is PostgresApplicationRecorder else AggregateRecorder
    assert name in interface.__abstractmethods__ or hasattr(interface, name)
    assert _parameters(getattr(ours, name)) == _parameters(getattr(library, name))
    assert _parameters(getattr(library, name)) == _parameters(getattr(interface, name))


def _own_names(cls: type, library: type) -> set[str]:
    """Names ``cls`` or a base of it that is not the library's defines."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is library or issubclass(library, klass):
            break
        names.update(klass.__dict__)
    # (Dunders, and the ABC machinery every subclass of an abstract class gets.)
    return {n for n in names if not (n.startswith("__") and n.endswith("__")) and n != "_abc_impl"}


@pytest.mark.parametrize(("ours", "library"), PAIRS)
def test_no_name_of_the_recorders_overrides_one_of_the_librarys_but_the_interface(
    ours: type, library: type
) -> None:
    # A private step of ours named as one of the library's hooks (its
    # ``_insert_events``, ``_insert_stored_events``, ``_lock_table``...) would change
    # what the library's own methods do; an upgrade that adds one fails here.
    overridden = {name for name in _own_names(ours, library) if hasattr(library, name)}
    assert overridden == set(INTERFACE) & overridden
    assert set(INTERFACE) <= _own_names(ours, library)


def test_the_recorder_reads_only_public_attributes_the_library_sets(runtime: Runtime) -> None:
    # The event log's environment makes the library construct our recorder (its
    # APPLICATION_RECORDER_TOPIC), which then reads what the library's constructor set.
    recorder = runtime.log.recorder
    assert isinstance(recorder, TenantScopedRecorder)
    datastore = recorder.datastore
    assert isinstance(datastore, PostgresDatastore)
    assert datastore.schema == runtime.database.schema
    assert isinstance(datastore.lock_timeout, int | float)
    for used in ("get_connection", "transaction"):
        assert callable(getattr(datastore, used))
    assert recorder.events_table_name == "palimpsest_events"
    # The NOTIFY channel the elected drains LISTEN on is the library's.
    assert recorder.channel_name == recorder.events_table_name.replace(".", "_")
    snapshots = runtime.log.snapshots
    assert snapshots is not None
    assert isinstance(snapshots.recorder, TenantScopedSnapshotRecorder)


def test_the_events_table_is_locked_as_the_library_locks_it(runtime: Runtime) -> None:
    # Readers of the log (and the library's own notification readers) rely on writers
    # taking this lock, in this mode, before they insert.
    recorder = runtime.log.recorder
    assert isinstance(recorder, TenantScopedRecorder)
    library_lock = recorder.lock_table_statements[-1]
    assert isinstance(library_lock, sql.Composable)
    assert library_lock.as_bytes(None) == recorder._lock_statement
