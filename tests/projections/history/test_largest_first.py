"""The order replay workers take tenants in: each once, the largest first."""

from __future__ import annotations

from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st

from palimpsest.projections.history._replay_workers import largest_first

SIZES = st.dictionaries(st.builds(uuid4), st.integers(0, 10**6), max_size=40)


@given(sizes=SIZES)
def test_every_tenant_comes_once_and_no_smaller_one_before_a_larger(
    sizes: dict[UUID, int],
) -> None:
    order = largest_first(sizes)
    assert sorted(order, key=str) == sorted(sizes, key=str)
    assert [sizes[t] for t in order] == sorted(sizes.values(), reverse=True)
