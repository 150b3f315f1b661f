"""When a daily job runs: a cron line of the form ``M H * * *`` (UTC).

The forgetting pass runs once a day (seed 000: ``30 4 * * *``, daily at
04:30 UTC, clear of the hourly consolidation tick). Only daily lines are
accepted: a minute and an hour, every other field ``*``. Anything else is
refused, rather than silently read as something it does not say.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from palimpsest.domain.errors import InvalidInputError

__all__ = ["DailySchedule", "parse_daily"]


@dataclass(frozen=True)
class DailySchedule:
    """A time of day, in UTC, at which a daily job is due."""

    at: time

    def due_on(self, day: datetime) -> datetime:
        """Return when the job is due on ``day``'s UTC date."""
        date = day.astimezone(UTC).date()
        return datetime.combine(date, self.at, tzinfo=UTC)

    def next_after(self, moment: datetime) -> datetime:
        """Return the first time the job is due strictly after ``moment``."""
        due = self.due_on(moment)
        return due if due > moment else due + timedelta(days=1)

    def last_due(self, moment: datetime) -> datetime:
        """Return the latest time the job was due at or before ``moment``."""
        due = self.due_on(moment)
        return due if due <= moment else due - timedelta(days=1)


def parse_daily(line: str) -> DailySchedule:
    """Return the schedule of a daily cron line ``M H * * *`` (UTC).

    Raises:
        InvalidInputError: not five fields, a minute outside 0-59 or an hour outside
            0-23 (plain numbers only), or any other field but ``*``.
    """
    fields = line.split()
    if len(fields) != 5 or any(f != "*" for f in fields[2:]):
        msg = f"the schedule {line!r} is not a daily cron line 'M H * * *'"
        raise InvalidInputError(msg)
    minute, hour = fields[:2]
    if not (minute.isdigit() and hour.isdigit()):
        msg = f"the schedule {line!r} needs a plain minute and hour ('30 4 * * *')"
        raise InvalidInputError(msg)
    if not (0 <= int(minute) <= 59 and 0 <= int(hour) <= 23):
        msg = f"the schedule {line!r} has a minute outside 0-59 or an hour outside 0-23"
        raise InvalidInputError(msg)
    return DailySchedule(time(int(hour), int(minute)))
