"""Replay's mapper reads a state framed in any way as the log's own mapper does.

The log's states are one JSON value with nothing around it, which replay reads
in one call; a state with whitespace around it, or anything after its value,
must still decode, or fail with the same error, as through
:func:`~palimpsest.projections.store.eventlog.event_mapper`.
"""

from __future__ import annotations

from uuid import uuid4

import pytest
from eventsourcing.persistence import StoredEvent

from palimpsest.projections.history._replay_mapper import replay_mapper
from palimpsest.projections.store.eventlog import event_mapper
from tests.projections.history.test_replay_mapper import _same

_STATE = (
    '{"timestamp":{"_type_":"datetime_iso","_data_":"2026-12-07T01:33:44+00:00"},'
    '"principal_id":{"_type_":"uuid_hex","_data_":"' + "ab" * 16 + '"}}'
)


@pytest.mark.parametrize(
    "framed",
    [
        _STATE,
        f" {_STATE}",
        f"{_STATE}\n",
        f"\t {_STATE} \r\n",
        f"{_STATE} x",
        f"{_STATE}{_STATE}",
        f"{_STATE},",
        f"\ufeff{_STATE}",
        "",
        "  ",
        "1 2",
        '"a"',
    ],
)
def test_a_state_decodes_or_fails_as_the_log_would_whatever_is_around_it(framed: str) -> None:
    log, replay = event_mapper(), replay_mapper()
    stored = StoredEvent(uuid4(), 2, "palimpsest:MemoryPinned", framed.encode("utf8"))
    _same(log, replay, stored)
