"""Aggregate ids: a UUID is taken as it is, text is parsed (the write path keys its
conflict checks and positions by them, several times a write)."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.projections.store.ids import as_uuid


@given(st.uuids())
def test_a_uuid_is_taken_as_it_is_and_its_text_is_parsed(value: UUID) -> None:
    assert as_uuid(value) is value
    assert as_uuid(str(value)) == value
    assert type(as_uuid(str(value))) is UUID


def test_text_that_spells_no_uuid_is_refused() -> None:
    with pytest.raises(ValueError):
        as_uuid("not a uuid")
