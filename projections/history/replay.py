"""Replay: what every memory was believed to be at a log position or a time.

Each tenant's log is replayed up to its last complete write at or before the
position (a time resolves to the last position recorded by then, per
tenant), and every memory that existed then is projected by the same
function as live and as-of reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from palimpsest.projections.history.log_scan import Progress, log_head, replay_tenant, tenant_ids
from palimpsest.projections.store.database import Database
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.views.as_of import position_at, write_boundary
from palimpsest.projections.views.erasures import erased_memories, erasure_placeholder
from palimpsest.projections.views.read_models import TenantReadModels

__all__ = ["LogSource", "replay_beliefs"]


class LogSource(Protocol):
    """What replay reads from: the event log and the database it lives in (a runtime)."""

    @property
    def log(self) -> EventLog: ...

    @property
    def database(self) -> Database: ...


def replay_beliefs(
    runtime: LogSource,
    *,
    at_position: int | None = None,
    as_of: datetime | None = None,
    tenant: UUID | None = None,
    report: Callable[[str], None] = lambda _: None,
) -> Iterator[dict[str, Any]]:
    """Yield ``{tenant_id, position, memory_id, belief}`` for every memory that existed
    at the position (or time), tenant by tenant, oldest memory first. A memory
    erased since has ``erasure`` (the decision) in place of its belief: erasure
    reaches back into every past read."""
    log: EventLog = runtime.log
    database = runtime.database
    schema = database.schema
    with database.owner_connection(autocommit=True) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        with conn.cursor() as cur:
            head = log_head(cur, schema)
            tenants = [t for t in tenant_ids(cur, schema) if tenant in (None, t)]
        progress = Progress("replay", min(head, at_position or head), report)
        for tenant_id in tenants:
            if as_of is not None:
                position = position_at(log, tenant_id, as_of)
            else:
                assert at_position is not None
                position = write_boundary(log, tenant_id, min(at_position, head))
            models = TenantReadModels(tenant_id)
            replay_tenant(conn, schema, log.mapper, models, upto=position, progress=progress)
            rows = sorted(
                models.table_rows("memory_index"), key=lambda row: (row[1][4], str(row[0][0]))
            )
            erased = erased_memories(log, tenant_id, [key[0] for key, _ in rows])
            for (memory_id,), _ in rows:
                line: dict[str, Any] = {
                    "tenant_id": str(tenant_id),
                    "position": position,
                    "memory_id": str(memory_id),
                }
                if memory_id in erased:
                    placeholder = erasure_placeholder(erased[memory_id])
                    line["erasure"] = placeholder.model_dump(mode="json")
                else:
                    line["belief"] = models.belief_row(memory_id)[-1]
                yield line
        report(progress.line())
