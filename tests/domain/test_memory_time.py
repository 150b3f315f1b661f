"""A memory's time: the latest capture its current version's active support cites, else
when that version was recorded; nothing else touches it, and order never matters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.domain.memory import Memory
from palimpsest.domain.memory_time import MEMORY_TIME_EVENTS, MemoryTimes, memory_time
from palimpsest.domain.observation import Observation

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
PRINCIPAL = uuid4()


@dataclass(frozen=True)
class _Live:
    version_id: UUID
    support: frozenset[str]


def _event(event_class: Any, /, **fields: Any) -> object:
    """An event as its aggregate would record it (the library's event classes take
    their fields as keywords, which mypy cannot see)."""
    made: object = event_class(**fields)
    return made


def _at(days: int) -> datetime:
    return EPOCH + timedelta(days=days)


def _version(memory: UUID, version: UUID) -> object:
    return _event(
        Memory.VersionRecorded,
        originator_id=memory,
        originator_version=2,
        timestamp=EPOCH,
        version_id=version,
        content_digest="d",
        size_bytes=1,
        excerpts=[],
        principal_id=PRINCIPAL,
    )


def _contribution(memory: UUID, contribution: UUID, observation: UUID) -> object:
    return _event(
        Memory.ContributionAdded,
        originator_id=memory,
        originator_version=3,
        timestamp=EPOCH,
        contribution_id=contribution,
        version_id=uuid4(),
        excerpt={"observation_id": str(observation), "start": 0, "end": 1},
        proposer_id=PRINCIPAL,
        model_id=None,
        trust=1.0,
        principal_id=PRINCIPAL,
    )


def _captured(observation: UUID, at: datetime) -> object:
    return _event(
        Observation.Created,
        originator_id=observation,
        originator_version=1,
        timestamp=EPOCH,
        originator_topic="palimpsest.domain.observation:Observation",
        tenant_id=uuid4(),
        digest="d",
        size_bytes=1,
        media_type="text/plain",
        source=None,
        captured_at=at,
        transient=False,
        retention_deadline=at,
        principal_id=PRINCIPAL,
    )


def _untouching(memory: UUID) -> list[object]:
    """Events about a memory that are no touch: an importance, an edge and its
    retraction, a pin, an archive and a restore, a deactivated contribution."""
    edge = uuid4()
    decided = {"decision_id": uuid4(), "principal_id": PRINCIPAL}
    return [
        _event(
            Memory.Created,
            originator_id=memory,
            originator_version=1,
            timestamp=EPOCH,
            originator_topic="palimpsest.domain.memory:Memory",
            tenant_id=uuid4(),
            memory_type="fact",
            scope="user",
            project=None,
            topic=None,
            principal_id=PRINCIPAL,
            importance=0.9,
        ),
        _event(
            Memory.EdgeAdded,
            originator_id=memory,
            originator_version=4,
            timestamp=EPOCH,
            edge_id=edge,
            kind="conflicts_with",
            target_id=uuid4(),
            **decided,
        ),
        _event(
            Memory.EdgeRetracted,
            originator_id=memory,
            originator_version=5,
            timestamp=EPOCH,
            edge_id=edge,
            **decided,
        ),
        _event(
            Memory.Pinned, originator_id=memory, originator_version=6, timestamp=EPOCH, **decided
        ),
        _event(
            Memory.Archived,
            originator_id=memory,
            originator_version=7,
            timestamp=EPOCH,
            reason="r",
            **decided,
        ),
        _event(
            Memory.Restored, originator_id=memory, originator_version=8, timestamp=EPOCH, **decided
        ),
        _event(
            Memory.ContributionDeactivated,
            originator_id=memory,
            originator_version=9,
            timestamp=EPOCH,
            contribution_id=uuid4(),
            **decided,
        ),
    ]


# One memory's history: its versions (the last is current, recorded on the given day),
# and contributions (cited observation's capture day or None: not in the log; whether
# it is in the current version's active support).
_histories = st.lists(
    st.tuples(
        st.lists(st.integers(0, 400), min_size=1, max_size=3),
        st.lists(
            st.tuples(st.one_of(st.none(), st.integers(-400, 400)), st.booleans()), max_size=4
        ),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(histories=_histories, order=st.randoms(use_true_random=False), noise=st.booleans())
def test_only_the_current_versions_recording_and_active_support_date_a_memory(
    histories: list[tuple[list[int], list[tuple[int | None, bool]]]],
    order: object,
    noise: bool,
) -> None:
    live: dict[UUID, _Live] = {}
    events: list[tuple[object, datetime]] = []
    expected: dict[UUID, datetime] = {}
    for versions, contributions in histories:
        memory = uuid4()
        version_ids = [uuid4() for _ in versions]
        for version_id, day in zip(version_ids, versions, strict=True):
            events.append((_version(memory, version_id), _at(day)))
        support: set[str] = set()
        cited: list[datetime] = []
        for captured_day, active in contributions:
            contribution, observation = uuid4(), uuid4()
            events.append((_contribution(memory, contribution, observation), EPOCH))
            if captured_day is not None:
                events.append((_captured(observation, _at(captured_day)), EPOCH))
            if active:
                support.add(str(contribution))
                if captured_day is not None:
                    cited.append(_at(captured_day))
        live[memory] = _Live(version_ids[-1], frozenset(support))
        expected[memory] = max(cited) if cited else _at(versions[-1])
        if noise:
            events.extend((e, _at(999)) for e in _untouching(memory))
    order.shuffle(events)  # type: ignore[attr-defined]

    times = MemoryTimes(live)
    for event, recorded_at in events:
        counted = times.take(event, recorded_at)
        assert counted == isinstance(event, MEMORY_TIME_EVENTS)
    assert {m: times.time_of(m) for m in live} == expected


@given(
    captures=st.dictionaries(st.integers(0, 5), st.integers(-100, 100)),
    cited=st.sets(st.integers(0, 8)),
    version_day=st.integers(-100, 100),
)
def test_a_memory_is_as_old_as_its_latest_known_cited_capture(
    captures: dict[int, int], cited: set[int], version_day: int
) -> None:
    ids = {i: UUID(int=i + 1) for i in range(9)}
    captured = {ids[i]: _at(d) for i, d in captures.items()}
    known = [_at(captures[i]) for i in cited if i in captures]
    got = memory_time({ids[i] for i in cited}, captured, _at(version_day))
    # A newer capture wins even over a later version; none known: the version's time
    assert got == (max(known) if known else _at(version_day))
