"""Which writes of a group commit are refused before its transaction: every refusal
is one the database would give (a version taken, or a read that changed), and the
writes kept never conflict with each other nor with what the process committed."""

from __future__ import annotations

import uuid
from uuid import UUID

from eventsourcing.persistence import IntegrityError, StoredEvent
from hypothesis import event, given
from hypothesis import strategies as st

from palimpsest.projections.store._group_conflicts import conflicting
from palimpsest.projections.store.errors import StaleReadError

AGGREGATES = [uuid.UUID(int=i + 1) for i in range(4)]

Member = tuple[list[StoredEvent], dict[UUID, int]]


def _member(writes: dict[UUID, tuple[int, int]], reads: dict[UUID, int]) -> Member:
    """A write recording, per aggregate, ``count`` events from version ``first``, having
    read ``reads`` (aggregate: version) without changing them."""
    stored = [
        StoredEvent(aggregate_id, version, "topic", b"{}")
        for aggregate_id, (first, count) in writes.items()
        for version in range(first, first + count)
    ]
    return stored, dict(reads)


@st.composite
def _members(draw: st.DrawFn) -> Member:
    written = draw(st.sets(st.sampled_from(AGGREGATES), max_size=3))
    writes = {
        a: (draw(st.integers(1, 4)), draw(st.integers(1, 2))) for a in sorted(written, key=str)
    }
    unread = [a for a in AGGREGATES if a not in written]
    reads = draw(st.dictionaries(st.sampled_from(unread), st.integers(1, 4))) if unread else {}
    return _member(writes, reads)


def _writes(member: Member) -> dict[UUID, int]:
    """The first version the member records of each aggregate it writes."""
    first: dict[UUID, int] = {}
    for stored in member[0]:
        aggregate_id, version = UUID(str(stored.originator_id)), stored.originator_version
        first[aggregate_id] = min(first.get(aggregate_id, version), version)
    return first


def _taken(member: Member, earlier: list[Member], committed: dict[UUID, int]) -> bool:
    return any(committed.get(a, 0) >= v for a, v in _writes(member).items()) or any(
        a in _writes(e) for e in earlier for a in _writes(member)
    )


def _stale(member: Member, earlier: list[Member], committed: dict[UUID, int]) -> bool:
    reads = member[1]
    return (
        any(committed.get(a, v) > v for a, v in reads.items())
        or any(a in _writes(e) for e in earlier for a in reads)
        or any(a in e[1] for e in earlier for a in _writes(member))
        or any(e[1].get(a, v) != v for e in earlier for a, v in reads.items())
    )


@given(
    st.lists(_members(), min_size=1, max_size=6),
    st.dictionaries(st.sampled_from(AGGREGATES), st.integers(0, 4)),
)
def test_refusals_are_exactly_the_conflicts_with_earlier_kept_writes_or_committed_versions(
    members: list[Member], committed: dict[UUID, int]
) -> None:
    refused = conflicting(members, committed)
    kept: list[Member] = []
    for index, member in enumerate(members):
        if _taken(member, kept, committed):
            event("a version taken")
            assert isinstance(refused.get(index), IntegrityError), (index, refused)
        elif _stale(member, kept, committed):
            event("a read that changed")
            assert isinstance(refused.get(index), StaleReadError), (index, refused)
        else:
            event("kept")
            assert index not in refused, (index, refused)
            kept.append(member)


def test_a_write_of_several_versions_of_one_aggregate_is_kept_alone() -> None:
    a, b = AGGREGATES[:2]
    assert conflicting([_member({a: (3, 2)}, {b: 1})], {a: 2, b: 1}) == {}


def test_a_group_may_keep_nothing_and_the_first_write_is_refused_only_by_committed_versions() -> (
    None
):
    a, b = AGGREGATES[:2]
    first, second = _member({a: (3, 1)}, {}), _member({b: (2, 1)}, {a: 2})
    # Version 3 of a was committed since the first was built; the second read a at 2.
    refused = conflicting([first, second], {a: 3, b: 1})
    assert set(refused) == {0, 1}
    assert isinstance(refused[0], IntegrityError) and isinstance(refused[1], StaleReadError)
    # Nothing committed since: the first is kept, and the second read what it writes.
    refused = conflicting([first, second], {b: 1})
    assert set(refused) == {1} and isinstance(refused[1], StaleReadError)
