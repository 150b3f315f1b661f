"""Sharing tenants out to replay workers: disjoint, complete, balanced by size."""

from __future__ import annotations

from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st

from palimpsest.projections.history._replay_workers import split_tenants

SIZES = st.dictionaries(st.builds(uuid4), st.integers(0, 10**6), max_size=40)


@given(sizes=SIZES, workers=st.integers(1, 8))
def test_every_tenant_goes_to_exactly_one_non_empty_group(
    sizes: dict[UUID, int], workers: int
) -> None:
    groups = split_tenants(sizes, workers)
    flat = [t for g in groups for t in g]
    assert sorted(flat, key=str) == sorted(sizes, key=str)
    assert len(groups) <= max(1, workers)
    assert all(groups) or not sizes


@given(sizes=SIZES, workers=st.integers(1, 8))
def test_no_group_is_heavier_than_the_lightest_plus_the_largest_tenant(
    sizes: dict[UUID, int], workers: int
) -> None:
    # The greedy rule (largest first, to the lightest group) bounds the imbalance.
    groups = split_tenants(sizes, workers)
    if len(groups) < 2:
        return
    loads = [sum(sizes[t] for t in g) for g in groups]
    assert max(loads) - min(loads) <= max(sizes.values())


def test_equal_tenants_split_evenly() -> None:
    sizes = {uuid4(): 100 for _ in range(4)}
    assert sorted(len(g) for g in split_tenants(sizes, 2)) == [2, 2]
    assert split_tenants({}, 2) == []
