"""Feature tables are written by the writers the event log is made with, in each write's
transaction, and the log's own modules name none of them.

A maintainer adding a read model kept by the write path writes a domain rule and a
:class:`~palimpsest.projections.store.table_writers.TableWriter`; these tests pin
what the store promises such a writer: it runs in the write's transaction (it sees
the write's position; its refusal leaves nothing of the write), every event log
takes writers explicitly, and the store itself knows no feature's table.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import pytest

from palimpsest.domain.dependency import Row, Rule
from palimpsest.domain.tenant import Tenant
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.runtime import table_writers
from palimpsest.projections.store.errors import StaleReadError
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.schema import metadata
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.store.table_writers import TableWriter
from palimpsest.projections.views.table_writers import VIEW_WRITERS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies
    from palimpsest.projections.runtime import Runtime

STORE = Path(__file__).resolve().parents[3] / "projections" / "store"
LOG_MODULES = ("eventlog.py", "_recorder.py", "_log_sql.py", "_group_commit.py", "_write.py")
"""The event log and its recorder, group commit, statements and write context."""

LOG_TABLES = {
    "palimpsest_events",
    "palimpsest_snapshots",
    "payloads",
    "revisions",
    "revision_tenants",
    "memory_links",
    "evidence_links",
    "proposer_links",
    "tokens",
    "idempotency_keys",
}
"""The log's own bookkeeping: events, snapshots, payloads, the watermark's marks and
dependency rows, token lookups and idempotency records."""


@dataclass(frozen=True, slots=True)
class _Founded(Row):
    tenant_id: UUID


def _founded(event: Tenant.Created) -> tuple[Row, ...]:
    return (_Founded(event.originator_id),)


class _Probe(TableWriter):
    """Records the position its write step sees; refuses the write if told to."""

    rules = (Rule((Tenant.Created,), _founded),)
    reads = frozenset({_Founded})

    def __init__(self, *, refuse: bool) -> None:
        self.refuse = refuse
        self.seen: list[tuple[UUID, int]] = []

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        curs.execute("SELECT current_setting('palimpsest.position')::bigint")
        row = curs.fetchone()
        assert row is not None
        self.seen += [(f.tenant_id, int(row[0])) for f in found.of(_Founded)]

    def check(
        self, curs: Cursor[Any], schema: str, found: Dependencies, loaded: frozenset[UUID]
    ) -> None:
        if self.refuse:
            raise StaleReadError("the probe refuses")


@pytest.fixture
def probed(runtime: Runtime, request: pytest.FixtureRequest) -> Iterator[tuple[EventLog, _Probe]]:
    probe = _Probe(refuse=request.param)
    settings = DatabaseSettings(db_pool_size=2, db_max_overflow=2)
    log = EventLog(
        env=runtime.database.event_store_env(settings), writers=(*table_writers(), probe)
    )
    try:
        yield log, probe
    finally:
        log.close()


def _tenant_events(runtime: Runtime, tenant_id: UUID) -> int:
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{runtime.database.schema}".palimpsest_events'
            " WHERE originator_id = %s",
            (tenant_id,),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("probed", [False], indirect=True)
def test_a_writer_runs_in_the_writes_transaction(
    runtime: Runtime, probed: tuple[EventLog, _Probe]
) -> None:
    log, probe = probed
    issued = create_tenant(log, "probed tenant")
    # The writer saw the write's own position: it ran after the events' insert, in the
    # same transaction.
    [(tenant_id, position)] = probe.seen
    assert tenant_id == issued.tenant_id
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            f'SELECT max(notification_id) FROM "{runtime.database.schema}".palimpsest_events'
            " WHERE originator_id = %s",
            (tenant_id,),
        ).fetchone()
    assert row is not None and row[0] == position


@pytest.mark.parametrize("probed", [True], indirect=True)
def test_a_writers_refusal_leaves_nothing_of_the_write(
    runtime: Runtime, probed: tuple[EventLog, _Probe]
) -> None:
    log, probe = probed
    with pytest.raises(StaleReadError, match="the probe refuses"):
        create_tenant(log, "refused tenant")
    [(tenant_id, _)] = probe.seen
    assert _tenant_events(runtime, tenant_id) == 0


def test_every_event_log_is_made_with_its_writers_named(runtime: Runtime) -> None:
    # No default: a process that made its log without the standard writers would
    # leave every feature table behind the log.
    env = runtime.database.event_store_env(DatabaseSettings())
    with pytest.raises(TypeError, match="writers"):
        EventLog(env=env)  # type: ignore[call-arg]
    assert runtime.log.writers == table_writers()
    assert set(VIEW_WRITERS) <= set(table_writers())


def _strings(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


@pytest.mark.parametrize("module", LOG_MODULES)
def test_the_log_names_no_feature_table(module: str) -> None:
    feature_tables = {t.name for t in metadata.sorted_tables} - LOG_TABLES
    text = " ".join(_strings(STORE / module))
    named = {t for t in feature_tables if re.search(rf"\{{schema\}}\.{t}\b", text)}
    assert named == set()
    imports = {
        node.module
        for node in ast.walk(ast.parse((STORE / module).read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    upward = {m for m in imports if m.startswith("palimpsest.projections.") and ".store" not in m}
    assert upward == set()
    assert len((STORE / module).read_text().splitlines()) < 800
    if module == "eventlog.py":
        assert len((STORE / module).read_text().splitlines()) < 600
