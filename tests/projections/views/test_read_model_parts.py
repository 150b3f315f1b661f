"""Which part of a tenant's read models holds what: every memory, row and event in
exactly one part, the same in Python and in SQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.dependency import Citation, Dependencies, Link, Support
from palimpsest.domain.memory import Memory
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.read_model_parts import TenantPart

IDS = st.uuids()
COUNTS = st.integers(1, 8)
MEMORY_TOPICS = ("palimpsest:MemoryCreated", "palimpsest:VersionRecorded", "palimpsest:EdgeAdded")
TENANT_TOPICS = ("palimpsest:ObservationCaptured", "palimpsest:DecisionRecorded")


def _parts(count: int) -> list[TenantPart]:
    return [TenantPart(i, count) for i in range(count)]


@given(memory_id=IDS, count=COUNTS)
def test_every_memory_belongs_to_exactly_one_part(memory_id: UUID, count: int) -> None:
    assert sum(p.owns(memory_id) for p in _parts(count)) == 1


@given(originator=IDS, count=COUNTS, topic=st.sampled_from(MEMORY_TOPICS + TENANT_TOPICS))
def test_every_event_is_counted_by_one_part_and_read_by_it(
    originator: UUID, count: int, topic: str
) -> None:
    parts = _parts(count)
    [counting] = [p for p in parts if p.counts(topic, originator)]
    assert counting.reads(topic, originator)
    if topic in TENANT_TOPICS:
        assert counting.index == 0 and not any(p.reads(topic, originator) for p in parts[1:])
    readers = [p for p in parts if p.reads(topic, originator)]
    # Only an edge is read beyond its own part: every part looks at its target.
    assert readers == ([*parts] if topic == "palimpsest:EdgeAdded" else [counting])


def test_an_unknown_topic_is_read_by_its_originators_part_where_decoding_fails() -> None:
    originator = uuid4()
    parts = _parts(3)
    readers = [p for p in parts if p.reads("palimpsest:MemoryTeleported", originator)]
    assert readers == [p for p in parts if p.owns(originator)]


def _edge(source: UUID, target: UUID) -> Memory.EdgeAdded:
    fields: dict[str, Any] = {
        "originator_id": source,
        "originator_version": 2,
        "timestamp": datetime.now(UTC),
        "edge_id": uuid4(),
        "kind": "extends",
        "target_id": target,
        "principal_id": uuid4(),
    }
    return Memory.EdgeAdded(**fields)


@given(source=IDS, target=IDS, count=st.integers(2, 8))
def test_an_edge_is_kept_by_its_sources_part_and_its_targets(
    source: UUID, target: UUID, count: int
) -> None:
    edge = _edge(source, target)
    keepers = {p.index for p in _parts(count) if p.keeps(edge)}
    assert keepers == {p.index for p in _parts(count) if p.owns(source) or p.owns(target)}


@given(a=IDS, b=IDS, observation=IDS, count=st.integers(1, 8))
def test_each_part_keeps_the_rows_and_marks_of_its_own_memories(
    a: UUID, b: UUID, observation: UUID, count: int
) -> None:
    edge_id, proposer = uuid4(), uuid4()

    def found() -> Dependencies:
        rows = Dependencies(touched={a, b})
        for row in (
            Link(a, b, "extends", True, edge_id),
            Link(b, a, "extends", False, edge_id),
            Citation(observation, a),
            Support(proposer, "m", b),
        ):
            rows.add(row)
        return rows

    whole = found()
    kept = [p.own(found()) for p in _parts(count)]
    assert sorted(map(str, (m for k in kept for m in k.touched))) == sorted(map(str, whole.touched))
    for kind in (Link, Citation, Support):
        assert sorted(map(repr, (r for k in kept for r in k.of(kind)))) == sorted(
            map(repr, whole.of(kind))
        )


@pytest.mark.parametrize("bad", [(-1, 2), (2, 2), (0, 0), (0, 257)])
def test_a_part_outside_its_count_is_refused(bad: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="no part"):
        TenantPart(*bad)


def test_sql_names_the_same_part_as_python(runtime: Runtime) -> None:
    ids = [uuid4() for _ in range(300)]
    with runtime.database.owner_connection() as conn:
        for count in (1, 2, 3, 7):
            for part in _parts(count):
                statement = "SELECT x FROM unnest(%s::uuid[]) AS t(x) WHERE " + part.owned(
                    "x"
                ).as_string(conn)
                found = {row[0] for row in conn.execute(statement, (ids,)).fetchall()}
                assert found == {i for i in ids if part.owns(i)}, (count, part.index)
