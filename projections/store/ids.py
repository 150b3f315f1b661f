"""Aggregate ids as :class:`~uuid.UUID` values, whatever the event store typed them as.

The ``eventsourcing`` library types an originator id as ``UUID | str``. Ours
are always UUIDs, but code that keys dictionaries by them must not trust the
type. Parsing a UUID's text again (``UUID(str(value))``) costs about 3
microseconds, and the write path did it six times a write.
"""

from __future__ import annotations

from uuid import UUID

__all__ = ["as_uuid"]


def as_uuid(value: UUID | str) -> UUID:
    """Return ``value`` if it is a :class:`~uuid.UUID`, else the UUID its text spells.

    Raises:
        ValueError: ``value`` is text that spells no UUID.
    """
    return value if type(value) is UUID else UUID(str(value))
