"""When each write became visible: the end of the write a log position falls in.

One write's events take consecutive positions in one transaction (the
library locks the events table while inserting), and its rows share that
transaction's ``xmin``. A write becomes visible to readers at its commit;
the latest time the log records before that commit is the ``recorded_at``
of the write's *last* event (``clock_timestamp()`` at insert). That time is
what reads report as a write's ``visible_at``, and its position as the
write's ``end``: an as-of read at ``visible_at`` (or at any ``recorded_at``
of the write's events) reads the state right after the write.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from palimpsest.projections.store.sql import schema_sql

if TYPE_CHECKING:
    from psycopg import Cursor

__all__ = ["WriteEnd", "write_ends"]


class WriteEnd(NamedTuple):
    """The last event of a write: its position, and when it was recorded (the write's
    ``visible_at``)."""

    position: int
    visible_at: datetime


# Per position: its transaction, where the next write begins (the first later event
# of another transaction; the largest bigint when none), and the last event before
# that. Each lateral is a lookup by position with LIMIT 1, which keeps it a
# parameterized index scan whose length follows the write's size (flattened into a
# join, it would scan the tenant's log), and the bounds are plain comparisons, which
# row-level security lets into the index condition.
_WRITE_ENDS = (
    "SELECT p.pos AS position, last.notification_id AS end_position,"
    " last.recorded_at AS visible_at"
    " FROM unnest(%s::bigint[]) AS p(pos)"
    " JOIN LATERAL (SELECT xmin::text AS tx FROM {schema}.palimpsest_events"
    "  WHERE notification_id = p.pos LIMIT 1) w ON true"
    " JOIN LATERAL (SELECT coalesce(min(notification_id), 9223372036854775807) AS bound"
    "  FROM {schema}.palimpsest_events"
    "  WHERE notification_id > p.pos AND xmin::text <> w.tx) nxt ON true"
    " JOIN LATERAL (SELECT notification_id, recorded_at FROM {schema}.palimpsest_events"
    "  WHERE notification_id >= p.pos AND notification_id < nxt.bound"
    "  ORDER BY notification_id DESC LIMIT 1) last ON true"
)


def write_ends(cur: Cursor[Any], schema: str, positions: Iterable[int]) -> dict[int, WriteEnd]:
    """Return, for each of ``positions`` (on ``cur``, a transaction of the tenant), the
    last event of the write it belongs to; positions with no event are left out."""
    wanted = sorted(set(positions))
    if not wanted:
        return {}
    cur.execute(schema_sql(_WRITE_ENDS, schema), (wanted,))
    return {
        int(row["position"]): WriteEnd(int(row["end_position"]), row["visible_at"])
        for row in cur.fetchall()
    }
