"""Replay's mapper reads the log exactly as the log's own mapper does.

Rebuild and verify decode through
:func:`~palimpsest.projections.history._replay_mapper.replay_mapper`, which
reuses the ids it has built. Whatever a row holds (a memory's events, its
snapshot, or bytes that cannot be read), it must give the same event, or fail
with the same error (verify shows that error as why a memory is quarantined),
as :func:`~palimpsest.projections.store.eventlog.event_mapper`. It relies on
the library's ``JSONTranscoder.names``; an upgrade that drops it fails here.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.domain import Snapshot
from eventsourcing.persistence import Mapper, StoredEvent

from palimpsest.domain.evidence import cut_excerpt
from palimpsest.domain.memory import Memory
from palimpsest.projections.history._replay_mapper import replay_mapper
from palimpsest.projections.store.eventlog import event_mapper

TEXT = "some evidence text, long enough to cut excerpts from"


def _memories() -> list[Memory]:
    """Two memories whose events cover versions, excerpts, contributions, an edge, a
    forget and an erasure, all by one principal (ids repeat, as in a real log)."""
    principal = uuid4()
    observation = uuid4()
    memory, target = (
        Memory.create(
            tenant_id=uuid4(),
            memory_type="fact",
            scope="user",
            project="p",
            topic=None,
            principal_id=principal,
        )
        for _ in range(2)
    )
    for i in range(3):
        memory.record_version(
            content_digest=f"sha256:{i}",
            size_bytes=i + 1,
            excerpts=(cut_excerpt(observation, TEXT, i, i + 7),),
            principal_id=principal,
            model_id="judge-1",
            trust=0.5,
        )
    memory.add_edge("extends", target, principal_id=principal, decision_id=uuid4())
    memory.deactivate_contribution(
        memory.contributions[0].contribution_id, decision_id=uuid4(), principal_id=principal
    )
    memory.forget("stale", decision_id=uuid4(), principal_id=principal)
    memory.erase_versions(
        [memory.versions[0].version_id], decision_id=uuid4(), principal_id=principal
    )
    return [memory, target]


def _same(log: Mapper[UUID], replay: Mapper[UUID], stored: StoredEvent) -> None:
    """Both mappers give an equal event of the same class, or the same error."""
    outcomes: list[tuple[str, Any]] = []
    for mapper in (log, replay):
        try:
            event = mapper.to_domain_event(stored)
        except Exception as error:  # compared below: the same class and message
            outcomes.append(("error", (type(error), str(error))))
        else:
            outcomes.append(("event", (type(event), vars(event))))
    assert outcomes[0] == outcomes[1]


def test_every_event_and_snapshot_of_a_memory_decodes_as_the_log_decodes_it() -> None:
    log, replay = event_mapper(), replay_mapper()
    memories = _memories()
    snapshots = [Snapshot.take(m) for m in memories]
    events = [e for m in memories for e in m.collect_events()]
    stored = [log.to_stored_event(e) for e in [*events, *snapshots]]
    for row in stored:
        _same(log, replay, row)
    # Decoded twice (ids now kept), still the same.
    for row in stored:
        _same(log, replay, row)
    # And it encodes as the log does: rebuild writes the log's own snapshot bytes.
    assert [replay.to_stored_event(s).state for s in snapshots] == [
        log.to_stored_event(s).state for s in snapshots
    ]


def _uuid(data: str) -> str:
    return '{"_type_":"uuid_hex","_data_":' + data + "}"


UNREADABLE_STATES = [
    # ids that are not 32 hex digits, or not strings at all
    _uuid('"zz' + "0" * 30 + '"'),
    _uuid('"' + "0" * 31 + '"'),
    _uuid('"{' + "0" * 30 + '}"'),
    _uuid('"-' + "f" * 31 + '"'),
    _uuid("12"),
    _uuid("null"),
    _uuid("[1]"),
    # names no transcoding answers to, or that are not names
    '{"_type_":"no_such_type","_data_":"x"}',
    '{"_type_":null,"_data_":"x"}',
    '{"_type_":[1],"_data_":"x"}',
    '{"_type_":"datetime_iso","_data_":"not a time"}',
    # not JSON, not UTF-8
    "{",
    "\udcff",
]

READABLE_STATES = [
    # looks transcoded but is not: a plain dict stays a dict
    '{"_type_":"uuid_hex"}',
    '{"_type_":"uuid_hex","_data_":"x","other":1}',
    '{"_data_":"x","other":1}',
    # ids in every form UUID() accepts
    _uuid('"' + "A" * 32 + '"'),
    _uuid('"12345678-1234-5678-1234-567812345678"'),
    _uuid('"urn:uuid:12345678-1234-5678-1234-567812345678"'),
]


@pytest.mark.parametrize("value", UNREADABLE_STATES + READABLE_STATES)
def test_a_malformed_value_fails_or_decodes_as_the_log_would(value: str) -> None:
    log, replay = event_mapper(), replay_mapper()
    state = (
        '{"timestamp":{"_type_":"datetime_iso","_data_":"2026-12-07T01:33:44+00:00"},'
        '"principal_id":' + value + "}"
    ).encode("utf8", "surrogateescape")
    stored = StoredEvent(uuid4(), 2, "palimpsest:MemoryPinned", state)
    _same(log, replay, stored)
    _same(log, replay, stored)  # a failed id is not kept as if it had decoded
