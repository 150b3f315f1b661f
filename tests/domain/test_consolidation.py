"""Consolidation's grouping: stars around the extractive choice, within one kind, never
events, at the floor; the excerpts' union keeps every source's provenance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.consolidation import (
    MAX_GROUP,
    NEAR_DUPLICATE_SIMILARITY,
    MergeMember,
    extractive_order,
    merge_groups,
    union_excerpts,
)
from palimpsest.domain.evidence import Excerpt

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _member(
    n: int, *, kind: int = 0, typ: str = "fact", support: int = 1, age: int = 0
) -> MergeMember:
    return MergeMember(
        memory_id=UUID(int=n + 1),
        memory_type=typ,
        scope=f"scope{kind}",
        project=None,
        support=support,
        recorded_at=T0 - timedelta(days=age),
        content_digest=f"d{n}",
    )


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[MergeMember], dict[tuple[UUID, UUID], float], float]:
    n = draw(st.integers(0, 14))
    members = [
        _member(
            i,
            kind=draw(st.integers(0, 1)),
            typ=draw(st.sampled_from(["fact", "note", "event"])),
            support=draw(st.integers(0, 3)),
            age=draw(st.integers(0, 5)),
        )
        for i in range(n)
    ]
    pairs: dict[tuple[UUID, UUID], float] = {}
    for i in range(n):
        for j in range(i + 1, n):
            if draw(st.booleans()):
                pairs[(members[i].memory_id, members[j].memory_id)] = draw(st.floats(0.0, 1.0))
    return members, pairs, draw(st.floats(0.5, 1.0))


@given(corpora(), st.randoms())
def test_groups_are_stars_of_one_kind_at_the_floor(corpus, rnd) -> None:  # type: ignore[no-untyped-def]
    members, pairs, floor = corpus
    shuffled = list(members)
    rnd.shuffle(shuffled)
    groups = merge_groups(shuffled, pairs, floor)
    # Independent of the order members and pairs come in.
    flipped = {(b, a): v for (a, b), v in pairs.items()}
    assert groups == merge_groups(members, flipped, floor)
    ids = [m for g in groups for m in g.memory_ids]
    assert len(ids) == len(set(ids)), "a memory is in one group at most"
    for group in groups:
        assert 2 <= len(group.members) <= MAX_GROUP
        assert len({m.kind for m in group.members}) == 1
        assert all(m.memory_type != "event" for m in group.members)
        centre = group.centre
        assert centre == extractive_order(group.members)[0]
        for other in group.members[1:]:
            key = (centre.memory_id, other.memory_id)
            value = pairs.get(key, pairs.get((key[1], key[0])))
            assert value is not None
            assert value >= floor
        near = all(
            m.content_digest == centre.content_digest
            or pairs.get(
                (centre.memory_id, m.memory_id), pairs.get((m.memory_id, centre.memory_id), 0)
            )
            >= NEAR_DUPLICATE_SIMILARITY
            for m in group.members[1:]
        )
        assert group.near_duplicate == near


def test_a_chain_does_not_fold_its_ends_together() -> None:
    a, b, c = _member(0, support=3), _member(1, support=2), _member(2, support=1)
    groups = merge_groups(
        [a, b, c], {(a.memory_id, b.memory_id): 0.95, (b.memory_id, c.memory_id): 0.95}, 0.9
    )
    assert [g.memory_ids for g in groups] == [(a.memory_id, b.memory_id)]


def test_the_centre_is_best_supported_then_newest() -> None:
    old_strong = _member(0, support=2, age=5)
    new_weak = _member(1, support=1, age=0)
    newest_strong = _member(2, support=2, age=1)
    pairs = {
        (old_strong.memory_id, new_weak.memory_id): 0.99,
        (old_strong.memory_id, newest_strong.memory_id): 0.99,
        (new_weak.memory_id, newest_strong.memory_id): 0.99,
    }
    [group] = merge_groups([old_strong, new_weak, newest_strong], pairs, 0.9)
    assert group.centre == newest_strong
    assert group.near_duplicate


def test_events_never_merge() -> None:
    a, b = _member(0, typ="event"), _member(1, typ="event")
    assert merge_groups([a, b], {(a.memory_id, b.memory_id): 1.0}, 0.5) == []


@given(
    st.lists(
        st.lists(
            st.builds(
                Excerpt,
                st.sampled_from([UUID(int=1), UUID(int=2)]),
                st.integers(0, 3),
                st.integers(4, 6),
                st.sampled_from(["x", "y"]),
            ),
            max_size=4,
        ),
        max_size=4,
    )
)
def test_the_union_keeps_every_excerpt_once(lists: list[list[Excerpt]]) -> None:
    union = union_excerpts(lists)
    assert len(union) == len(set(union))
    assert set(union) == {e for excerpts in lists for e in excerpts}
