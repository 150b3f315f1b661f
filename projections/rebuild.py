"""Rebuild every read model from position 0, while the service keeps serving.

1. In one snapshot, replay every tenant's log into memory
   (:class:`~projections.read_models.TenantReadModels`) and copy the rows into
   shadow tables (``rebuild_<table>``), which only the owner role can see.
   Reads and writes go on meanwhile.
2. In one short transaction, lock the log against writers (``SHARE``: readers
   go on) and the read models against drains, replay what was written since
   the snapshot, re-copy the shadows of the tenants that wrote, and replace
   each tenant's live rows with the shadow rows. Readers see the old rows
   until the commit and the new ones after it; there is no moment with half.

Every rebuilt memory is published at its requested revision, so the
watermark is exact after the swap. An interrupted rebuild leaves only its
shadow tables, which the next run drops and recreates: the live tables are
changed by the final transaction or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.domain import Snapshot
from eventsourcing.persistence import Mapper
from eventsourcing.utils import get_topic
from psycopg import sql
from psycopg.types.json import Jsonb

from domain.memory import Memory
from projections._tenancy import set_tenant
from projections.database import Database
from projections.log_scan import Progress, log_head, replay_tenant, tenant_ids
from projections.migrations import EVENTS_TABLE, SNAPSHOTS_TABLE
from projections.read_models import TABLES, TenantReadModels

__all__ = ["RebuildReport", "rebuild"]

_LIVE_TABLES = (*(t.name for t in TABLES), SNAPSHOTS_TABLE)


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did."""

    tenants: int
    events: int
    position: int
    caught_up: int
    """Events written while the snapshot was replayed, replayed under the swap lock."""
    seconds: float
    swap_seconds: float


def _shadow(table: str) -> str:
    return f"rebuild_{table}"


def _create_shadows(cur: psycopg.Cursor[Any], schema: str) -> None:
    for table in _LIVE_TABLES:
        ident = {"s": sql.Identifier(schema), "t": sql.Identifier(table)}
        cur.execute(
            sql.SQL("DROP TABLE IF EXISTS {s}.{shadow}").format(
                **ident, shadow=sql.Identifier(_shadow(table))
            )
        )
        cur.execute(
            sql.SQL("CREATE TABLE {s}.{shadow} (LIKE {s}.{t} INCLUDING DEFAULTS)").format(
                **ident, shadow=sql.Identifier(_shadow(table))
            )
        )


def _drop_shadows(cur: psycopg.Cursor[Any], schema: str) -> None:
    for table in _LIVE_TABLES:
        cur.execute(
            sql.SQL("DROP TABLE IF EXISTS {}.{}").format(
                sql.Identifier(schema), sql.Identifier(_shadow(table))
            )
        )


def _adapt(value: Any) -> Any:
    return Jsonb(value) if isinstance(value, dict) else value


def _copy_tenant(
    cur: psycopg.Cursor[Any], schema: str, mapper: Mapper[UUID], models: TenantReadModels
) -> None:
    """Write a tenant's rebuilt rows, and its memories' snapshots, into the shadow tables."""
    statement = sql.SQL(
        "COPY {}.{} (tenant_id, originator_id, originator_version, topic, state) FROM STDIN"
    ).format(sql.Identifier(schema), sql.Identifier(_shadow(SNAPSHOTS_TABLE)))
    with cur.copy(statement) as copy:
        for (memory_id, version), state in models.snapshots.items():
            snapshot = Snapshot(
                originator_id=memory_id,
                originator_version=version,
                timestamp=Snapshot.create_timestamp(),
                topic=get_topic(Memory),
                state=state,
            )
            stored = mapper.to_stored_event(snapshot)
            copy.write_row((models.tenant_id, memory_id, version, stored.topic, stored.state))
    for spec in TABLES:
        columns = ("tenant_id", *spec.columns)
        statement = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
            sql.Identifier(schema),
            sql.Identifier(_shadow(spec.name)),
            sql.SQL(", ").join(map(sql.Identifier, columns)),
        )
        with cur.copy(statement) as copy:
            for key, values in models.table_rows(spec.name):
                copy.write_row((models.tenant_id, *key, *map(_adapt, values)))


def _swap_tenant(cur: psycopg.Cursor[Any], schema: str, tenant_id: UUID) -> None:
    """Replace a tenant's live read-model rows and snapshots with its shadow rows."""
    set_tenant(cur, tenant_id)
    names = {
        "s": sql.Identifier(schema),
        "live": sql.Identifier(SNAPSHOTS_TABLE),
        "shadow": sql.Identifier(_shadow(SNAPSHOTS_TABLE)),
    }
    cur.execute(
        sql.SQL("DELETE FROM {s}.{live} WHERE tenant_id = %s").format(**names), (tenant_id,)
    )
    cur.execute(
        sql.SQL("INSERT INTO {s}.{live} SELECT * FROM {s}.{shadow} WHERE tenant_id = %s").format(
            **names
        ),
        (tenant_id,),
    )
    for spec in TABLES:
        columns = sql.SQL(", ").join(map(sql.Identifier, ("tenant_id", *spec.columns)))
        live = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(spec.name))
        shadow = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(_shadow(spec.name)))
        cur.execute(sql.SQL("DELETE FROM {} WHERE tenant_id = %s").format(live), (tenant_id,))
        extra = sql.SQL(", published_at") if spec.name == "revisions" else sql.SQL("")
        value = sql.SQL(", clock_timestamp()") if spec.name == "revisions" else sql.SQL("")
        cur.execute(
            sql.SQL("INSERT INTO {} ({}{}) SELECT {}{} FROM {} WHERE tenant_id = %s").format(
                live, columns, extra, columns, value, shadow
            ),
            (tenant_id,),
        )
    cur.execute(
        f'UPDATE "{schema}".revision_tenants SET drained_position = marked_position'
        " WHERE tenant_id = %s",
        (tenant_id,),
    )


def rebuild(
    database: Database,
    mapper: Mapper[UUID],
    *,
    report: Callable[[str], None] = lambda _: None,
) -> RebuildReport:
    """Rebuild every read model of every tenant from the log and swap them in.

    Raises:
        KeyboardInterrupt: passed on after dropping the shadow tables; the live
            read models are untouched unless the swap had committed.
    """
    started = time.monotonic()
    schema = database.schema
    models: dict[UUID, TenantReadModels] = {}
    with database.owner_connection(autocommit=True) as conn:
        try:
            with conn.transaction(), conn.cursor() as cur:
                _create_shadows(cur, schema)
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                with conn.cursor() as cur:
                    head = log_head(cur, schema)
                    tenants = tenant_ids(cur, schema)
                progress = Progress("rebuild", head, report)
                for tenant_id in tenants:
                    models[tenant_id] = TenantReadModels(tenant_id)
                    replay_tenant(
                        conn, schema, mapper, models[tenant_id], upto=head, progress=progress
                    )
                report(progress.line())
            with conn.transaction(), conn.cursor() as cur:
                for tenant in models.values():
                    _copy_tenant(cur, schema, mapper, tenant)
            swap_started = time.monotonic()
            catch_up = Progress("catch-up", 0, lambda _: None)
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(f'LOCK TABLE "{schema}"."{EVENTS_TABLE}" IN SHARE MODE')
                for table in (*_LIVE_TABLES, "revision_tenants"):
                    cur.execute(f'LOCK TABLE "{schema}"."{table}" IN EXCLUSIVE MODE')
                final = log_head(cur, schema)
                for tenant_id in tenant_ids(cur, schema):
                    tenant = models.setdefault(tenant_id, TenantReadModels(tenant_id))
                    before = tenant.position
                    replay_tenant(conn, schema, mapper, tenant, upto=final, progress=catch_up)
                    if tenant.position != before:
                        set_tenant(cur, tenant_id)
                        for table in _LIVE_TABLES:
                            cur.execute(
                                sql.SQL("DELETE FROM {}.{} WHERE tenant_id = %s").format(
                                    sql.Identifier(schema), sql.Identifier(_shadow(table))
                                ),
                                (tenant_id,),
                            )
                        _copy_tenant(cur, schema, mapper, tenant)
                for tenant_id in models:
                    _swap_tenant(cur, schema, tenant_id)
                _drop_shadows(cur, schema)
            swap_seconds = time.monotonic() - swap_started
        except BaseException:
            # Interrupted (Ctrl-C) or failed: the live tables were not touched unless
            # the swap committed; the shadows go, so the next run starts clean.
            try:
                with conn.transaction(), conn.cursor() as cur:
                    _drop_shadows(cur, schema)
            except psycopg.Error:
                pass  # the connection is gone; the next run drops them
            raise
    return RebuildReport(
        tenants=len(models),
        events=progress.done,
        position=final,
        caught_up=catch_up.done,
        seconds=time.monotonic() - started,
        swap_seconds=swap_seconds,
    )
