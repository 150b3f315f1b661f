"""Events of the log this release cannot read, told apart from the ones it can.

The log is append-only and outlives releases: a row written by an older
release, a bad migration or a disk fault may hold state bytes that do not
decode, a topic no class answers to, a field missing, or a value
(a timestamp, a UUID) that does not parse. Such a row must harm its own
aggregate only: every reader that walks the log (loads, the drains, the feed,
export, rebuild, verify, replay) decodes through :func:`decode_event` and gets,
instead of the library's exception, an :class:`UnreadableEventError` naming the
row, so it can set that aggregate aside and go on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, is_dataclass
from typing import Any
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, StoredEvent

from palimpsest.projections.store.ids import as_uuid
from palimpsest.projections.store.storable import storable_text

__all__ = [
    "REASON_CHARS",
    "UnreadableEvent",
    "UnreadableEventError",
    "decode_event",
    "reason_of",
    "unreadable",
]

REASON_CHARS = 500
"""The longest reason kept: enough for the library's message, bounded for a row."""


@dataclass(frozen=True)
class UnreadableEvent:
    """A row of the log that cannot be decoded or applied: where it is, its topic as
    stored, a digest of its state bytes (never the bytes) and why."""

    originator_id: UUID
    originator_version: int
    topic: str
    state_sha256: str
    reason: str


class UnreadableEventError(Exception):
    """Raised by :func:`decode_event` for a row that cannot be read as an event."""

    def __init__(self, event: UnreadableEvent) -> None:
        super().__init__(f"event {event.originator_version} ({event.topic}): {event.reason}")
        self.event = event

    def __reduce__(self) -> tuple[type[UnreadableEventError], tuple[UnreadableEvent]]:
        # Pickled by its event (replay workers send read models between processes):
        # the default would call ``__init__`` with the message.
        return (type(self), (self.event,))


def reason_of(error: BaseException) -> str:
    """Return why a row cannot be read, as stored and served: ``Type: message``, at most
    :data:`REASON_CHARS` characters PostgreSQL can store."""
    return storable_text(f"{type(error).__name__}: {error}"[:REASON_CHARS])


def unreadable(stored: StoredEvent, error: BaseException) -> UnreadableEvent:
    """Return the record of a row that failed with ``error``."""
    return UnreadableEvent(
        originator_id=as_uuid(stored.originator_id),
        originator_version=stored.originator_version,
        topic=storable_text(str(stored.topic)),
        state_sha256=hashlib.sha256(bytes(stored.state)).hexdigest(),
        reason=reason_of(error),
    )


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    """The fields an event of ``cls`` must hold (none for a class that is no dataclass):
    found once per class, as every event read asks."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = frozenset(f.name for f in fields(cls)) if is_dataclass(cls) else frozenset()
        _FIELD_NAMES[cls] = names
    return names


def decode_event(
    mapper: Mapper[UUID], stored: StoredEvent, *, complete: bool = True
) -> DomainEventProtocol[UUID]:
    """Return the event of a stored row, with every field its class declares (unless
    ``complete`` is False: a caller that applies the event at once, whose apply fails
    on a missing field, spares the check, 1.6 µs an event).

    Raises:
        UnreadableEventError: the state does not decode, the topic resolves to no
            class, a value does not parse, or a declared field is missing (the
            library would build the event and fail later, wherever it is read).
    """
    try:
        event: Any = mapper.to_domain_event(stored)
        missing = _field_names(type(event)) - vars(event).keys() if complete else ()
    except Exception as error:
        raise UnreadableEventError(unreadable(stored, error)) from error
    if missing:
        message = f"{type(event).__qualname__} lacks {', '.join(sorted(missing))}"
        raise UnreadableEventError(unreadable(stored, KeyError(message)))
    decoded: DomainEventProtocol[UUID] = event
    return decoded
