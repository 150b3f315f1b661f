"""The decay cycles read model, kept in step with the log: recorded cycles
(``decay_cycles``), the fade label they set or clear (``memory_fades``), and what
consolidating their survivors did."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from palimpsest.domain.cycle_rows import CYCLE_RULES, ConsolidatedCycle, CycleRow
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.table_writers import TableWriter

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies
    from palimpsest.projections.store.table_writers import ReadModelRows


class CycleWriter(TableWriter):
    """``decay_cycles`` and ``memory_fades``."""

    rules = CYCLE_RULES
    reads = frozenset({ConsolidatedCycle, CycleRow})

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        """Index the write's decay cycles, set or clear the fade label they decided,
        and record what consolidating a cycle's survivors did."""
        for cycle in found.of(CycleRow):
            curs.execute(
                schema_query(
                    "INSERT INTO {schema}.decay_cycles (cycle_id, snapshot_at, policy_version,"
                    " report, position) VALUES (%b, %b, %b, %b, {position})",
                    schema,
                ),
                (cycle.cycle_id, cycle.snapshot_at, cycle.policy_version, Jsonb(cycle.report)),
            )
            curs.execute(
                schema_query(
                    "INSERT INTO {schema}.memory_fades (memory_id, cycle_id, faded_at, position)"
                    " SELECT m, %b, f, {position}"
                    " FROM unnest(%b::uuid[], %b::timestamptz[]) AS t(m, f)"
                    " ON CONFLICT (tenant_id, memory_id) DO UPDATE"
                    " SET cycle_id = excluded.cycle_id,"
                    " faded_at = excluded.faded_at, position = excluded.position",
                    schema,
                ),
                (
                    cycle.cycle_id,
                    [*cycle.faded, *cycle.unfaded],
                    [cycle.snapshot_at] * len(cycle.faded) + [None] * len(cycle.unfaded),
                ),
            )
        for consolidated in found.of(ConsolidatedCycle):
            curs.execute(
                schema_query(
                    "UPDATE {schema}.decay_cycles SET consolidation = %b WHERE cycle_id = %b",
                    schema,
                ),
                (Jsonb(consolidated.summary), consolidated.cycle_id),
            )

    def replay(self, rows: ReadModelRows, found: Dependencies, position: int) -> None:
        """Do in memory what :meth:`write` does to the tables."""
        cycles, fades = rows["decay_cycles"], rows["memory_fades"]
        for c in found.of(CycleRow):
            cycles[(c.cycle_id,)] = (c.snapshot_at, c.policy_version, c.report, position, None)
            for memory_id in c.faded:
                fades[(memory_id,)] = (c.cycle_id, c.snapshot_at, position)
            for memory_id in c.unfaded:
                fades[(memory_id,)] = (c.cycle_id, None, position)
        for consolidated in found.of(ConsolidatedCycle):
            key = (consolidated.cycle_id,)
            cycles[key] = (*cycles[key][:4], consolidated.summary)
