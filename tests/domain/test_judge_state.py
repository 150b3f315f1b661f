"""The judged state: the seed's shape, content cuts, batches under the size limit."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.judge_state import (
    JudgeItem,
    MemoryView,
    PairItem,
    SingleItem,
    batches,
    cut,
    render_state,
    state_chars,
    verdict_memories,
)
from palimpsest.domain.verdicts import Verdict

NOW = datetime(2026, 10, 26, 4, 30, tzinfo=UTC)


def _view(
    content: str = "Deploys go out on Fridays",
    *,
    topic: str | None = "deploys",
    days_ago: int = 40,
    touched: datetime | None = None,
    project: str | None = "3ngram",
) -> MemoryView:
    return MemoryView(
        memory_id=uuid4(),
        memory_type="decision",
        scope="work",
        project=project,
        topic=topic,
        content=content,
        recorded_at=NOW - timedelta(days=days_ago),
        last_touched_at=touched,
    )


def _rendered(items: Sequence[JudgeItem]) -> Any:
    """The state as a judge reads it, after a round trip through JSON."""
    return json.loads(json.dumps(render_state(NOW, items)))


def test_the_state_has_the_seeds_shape_key_for_key() -> None:
    # Given a stale single with one newer neighbour, and a pair
    touched = datetime(2026, 9, 1, 12, 0, 5, 123, tzinfo=timezone(timedelta(hours=2)))
    single = SingleItem("s0", _view(touched=touched), (_view("Deploys on Thursdays", days_ago=3),))
    pair = PairItem("p0", _view("Tea", topic=None), _view("Coffee now", days_ago=1), 0.8649)
    # When it is rendered
    state = render_state(NOW, [single, pair])
    # Then it reads as the seed's example, times in UTC to the second
    assert state == {
        "now": "2026-10-26T04:30:00Z",
        "items": [
            {
                "ref": "s0",
                "kind": "single",
                "memory": {
                    "type": "decision",
                    "scope": "work",
                    "project": "3ngram",
                    "topic": "deploys",
                    "content": "Deploys go out on Fridays",
                    "recordedAt": "2026-09-16T04:30:00Z",
                    "lastTouchedAt": "2026-09-01T10:00:05Z",
                },
                "newer": [
                    {
                        "ref": "s0n0",
                        "type": "decision",
                        "topic": "deploys",
                        "content": "Deploys on Thursdays",
                        "recordedAt": "2026-10-23T04:30:00Z",
                    }
                ],
            },
            {
                "ref": "p0",
                "kind": "pair",
                "older": {
                    "type": "decision",
                    "topic": None,
                    "content": "Tea",
                    "recordedAt": "2026-09-16T04:30:00Z",
                },
                "newer": {
                    "type": "decision",
                    "topic": "deploys",
                    "content": "Coffee now",
                    "recordedAt": "2026-10-25T04:30:00Z",
                },
                "similarity": 0.86,
            },
        ],
    }
    assert _rendered([single, pair]) == state  # JSON-ready as it is
    assert list(_rendered([single])["items"][0]) == ["ref", "kind", "memory", "newer"]


def test_a_memory_never_touched_and_without_project_renders_nulls() -> None:
    (item,) = _rendered([SingleItem("s0", _view(project=None))])["items"]
    assert item["memory"]["project"] is None and item["memory"]["lastTouchedAt"] is None
    assert item["newer"] == []


def test_judged_content_is_cut_to_1200_and_neighbours_to_300() -> None:
    long = "x" * 5_000
    single = SingleItem("s0", _view(long), (_view(long), _view(long)))
    pair = PairItem("p0", _view(long), _view(long), 0.9)
    rendered_single, rendered_pair = _rendered([single, pair])["items"]
    assert len(rendered_single["memory"]["content"]) == 1_200
    assert rendered_single["memory"]["content"].endswith("…")
    assert [len(n["content"]) for n in rendered_single["newer"]] == [300, 300]
    assert len(rendered_pair["older"]["content"]) == 1_200
    assert len(rendered_pair["newer"]["content"]) == 1_200


@given(st.text(max_size=400), st.integers(min_value=0, max_value=350))
def test_a_cut_text_fits_its_limit_and_keeps_its_beginning(text: str, limit: int) -> None:
    result = cut(text, limit)
    assert len(result) <= limit
    if len(text) <= limit:
        assert result == text
    elif limit > 0:
        assert result == text[: limit - 1] + "…"


@pytest.mark.parametrize(
    "items",
    [
        [SingleItem("s0", _view()), SingleItem("s0", _view())],
        # an item whose ref is another single's neighbour ref
        [SingleItem("s0", _view(), (_view(),)), PairItem("s0n0", _view(), _view(), 0.9)],
        [SingleItem("s 0", _view())],
        [SingleItem("", _view())],
        [SingleItem('s"0', _view())],
    ],
)
def test_refs_that_are_malformed_or_name_two_things_are_refused(items: list[JudgeItem]) -> None:
    with pytest.raises(InvalidInputError):
        render_state(NOW, items)


def test_a_naive_time_is_refused() -> None:
    naive = MemoryView(uuid4(), "fact", "user", None, None, "x", datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError):
        render_state(NOW, [SingleItem("s0", naive)])
    with pytest.raises(InvalidInputError):
        render_state(datetime(2026, 1, 1), [])


def _singles(sizes: Sequence[int]) -> list[JudgeItem]:
    # The topic is not cut: a long one is what makes an item large.
    return [SingleItem(f"s{i}", _view(topic="t" * size)) for i, size in enumerate(sizes)]


def test_twelve_ordinary_items_are_one_batch_and_a_thirteenth_starts_another() -> None:
    items = _singles([10] * 13)
    assert [len(b) for b in batches(NOW, items)] == [12, 1]
    assert [len(b) for b in batches(NOW, items[:12])] == [12]


def test_a_batch_that_would_pass_48k_characters_is_split() -> None:
    # Given twelve items of about 10k rendered characters each
    items = _singles([10_000] * 12)
    # When they are batched
    split = batches(NOW, items)
    # Then no batch passes 48,000 characters, and none could have taken the next item
    assert [len(b) for b in split] == [4, 4, 4]
    assert all(state_chars(NOW, b) <= 48_000 for b in split)
    assert state_chars(NOW, [*split[0], split[1][0]]) > 48_000


def test_an_item_too_large_alone_is_a_batch_of_one() -> None:
    items = _singles([10, 60_000, 10])
    split = batches(NOW, items)
    assert [[i.ref for i in b] for b in split] == [["s0"], ["s1"], ["s2"]]
    assert state_chars(NOW, split[1]) > 48_000


def test_the_batcher_measures_what_the_caller_sends() -> None:
    # Given a request that adds 1,000 characters of prompt to the state
    def measure(now: datetime, batch: Sequence[JudgeItem]) -> int:
        return 1_000 + state_chars(now, batch)

    items = _singles([10] * 6)
    one = state_chars(NOW, items[:1])
    # When the limit leaves room for the prompt and two items only
    limit = 1_000 + state_chars(NOW, items[:2])
    split = batches(NOW, items, max_chars=limit, measure=measure)
    assert [len(b) for b in split] == [2, 2, 2]
    assert one < limit


def test_bad_limits_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        batches(NOW, _singles([1]), max_items=0)
    with pytest.raises(InvalidInputError):
        batches(NOW, _singles([1]), max_chars=0)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=30_000), max_size=30),
    max_items=st.integers(min_value=1, max_value=12),
    max_chars=st.integers(min_value=500, max_value=60_000),
)
def test_batches_keep_every_item_in_order_within_both_limits(
    sizes: list[int], max_items: int, max_chars: int
) -> None:
    items = _singles(sizes)
    split = batches(NOW, items, max_items=max_items, max_chars=max_chars)
    assert [i for b in split for i in b] == items
    for index, batch in enumerate(split):
        assert 1 <= len(batch) <= max_items
        if len(batch) > 1:
            assert state_chars(NOW, batch) <= max_chars
        if index + 1 < len(split):  # greedy: the next item did not fit
            grown = [*batch, split[index + 1][0]]
            assert len(grown) > max_items or state_chars(NOW, grown) > max_chars


def _ids(item: JudgeItem) -> tuple[UUID, ...]:
    if isinstance(item, PairItem):
        return item.older.memory_id, item.newer.memory_id
    return (item.memory.memory_id, *(n.memory_id for n in item.newer))


def test_a_verdict_names_the_memory_it_is_about_and_the_one_it_relates() -> None:
    single = SingleItem("s0", _view(), (_view(), _view()))
    pair = PairItem("p0", _view(), _view(), 0.9)
    memory, first, second = _ids(single)
    older, newer = _ids(pair)

    def verdict(ref: str, action: str, related: str | None = None) -> Verdict:
        return Verdict(ref, action, None, None, "m", related_ref=related)  # type: ignore[arg-type]

    assert verdict_memories(single, verdict("s0", "supersede", "s0n1")) == (memory, second)
    assert verdict_memories(single, verdict("s0", "conflict", "s0n0")) == (memory, first)
    assert verdict_memories(single, verdict("s0", "archive")) == (memory, None)
    assert verdict_memories(pair, verdict("p0", "supersede")) == (older, newer)
    assert verdict_memories(pair, verdict("p0", "keep")) == (older, None)
    with pytest.raises(InvalidInputError):
        verdict_memories(single, verdict("s0", "supersede", "s0n2"))
    with pytest.raises(InvalidInputError):
        verdict_memories(single, verdict("p0", "keep"))
