"""What replay workers take, in order: each tenant once, whole or in consecutive parts,
and in parts only when it is large and holds more than a worker's share."""

from __future__ import annotations

from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st

from palimpsest.projections.history._replay_workers import (
    largest_first,
    replay_units,
    workers_for,
)

SIZES = st.dictionaries(st.builds(uuid4), st.integers(0, 10**6), max_size=12)


@given(sizes=SIZES, workers=st.integers(1, 4), split_from=st.integers(0, 10**6))
def test_each_tenant_is_replayed_whole_or_in_all_its_parts_one_after_another(
    sizes: dict[UUID, int], workers: int, split_from: int
) -> None:
    units = replay_units(sizes, workers, split_from=split_from)
    total = sum(sizes.values())
    tenants = list(dict.fromkeys(t for t, _ in units))
    assert tenants == largest_first(sizes)
    for tenant_id in tenants:
        own = [part for t, part in units if t == tenant_id]
        size = sizes[tenant_id]
        if workers > 1 and size >= split_from and size * workers > total:
            assert [(p.index, p.count) for p in own if p] == [(i, workers) for i in range(workers)]
            first = units.index((tenant_id, own[0]))
            assert units[first : first + workers] == [(tenant_id, p) for p in own]
        else:
            assert own == [None]
    assert workers_for(sizes, workers, split_from=split_from) == max(1, min(workers, len(units)))


def test_one_large_tenant_keeps_every_worker_busy_and_a_small_one_none_but_the_first() -> None:
    big, small = uuid4(), uuid4()
    assert workers_for({big: 60_000}, 2, split_from=50_000) == 2
    assert workers_for({big: 40_000}, 2, split_from=50_000) == 1
    # Ten equal tenants: each already a worker's work; none split.
    ten = {uuid4(): 100_000 for _ in range(10)}
    assert all(part is None for _, part in replay_units(ten, 2, split_from=50_000))
    assert [p is not None for _, p in replay_units({big: 90_000, small: 10}, 2, split_from=0)] == [
        True,
        True,
        False,
    ]
