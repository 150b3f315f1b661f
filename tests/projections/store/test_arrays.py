"""Arrays of a known element type reach PostgreSQL as the same values a plain list
does, NULLs and empty arrays included (the write path sends its rows as these)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.adapt import PyFormat
from psycopg.pq import Format

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.arrays import (
    BoolArray,
    ByteaArray,
    Int8Array,
    TextArray,
    UuidArray,
)

_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))
"""What a PostgreSQL text can hold (no NUL; lone surrogates cannot be encoded at all)."""

_CASES: list[tuple[type[list[Any]], str, st.SearchStrategy[Any]]] = [
    (UuidArray, "uuid[]", st.uuids()),
    (Int8Array, "int8[]", st.integers(-(2**63), 2**63 - 1)),
    (TextArray, "text[]", _TEXT),
    (ByteaArray, "bytea[]", st.binary(max_size=64)),
    (BoolArray, "bool[]", st.booleans()),
]


def _round_trip(runtime: Runtime, cast: str, value: Any) -> Any:
    with runtime.log.datastore.transaction(commit=False) as cur:
        cur.execute(f"SELECT %b::{cast} AS value", (value,))
        row = cur.fetchone()
    assert row is not None
    return row["value"]


@pytest.mark.parametrize(("cls", "cast", "elements"), _CASES, ids=[c[1] for c in _CASES])
def test_an_array_arrives_as_the_plain_list_does(
    runtime: Runtime, cls: type[list[Any]], cast: str, elements: st.SearchStrategy[Any]
) -> None:
    reached = {"empty": 0, "null": 0, "values": 0}

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.none() | elements, max_size=8))
    def check(values: list[Any]) -> None:
        reached["empty" if not values else "null" if None in values else "values"] += 1
        sent = _round_trip(runtime, cast, cls(values))
        assert sent == values
        assert sent == _round_trip(runtime, cast, list(values))

    check()
    assert all(reached.values()), reached


def test_a_uuid_array_takes_text_ids_too(runtime: Runtime) -> None:
    ids = ["6f1c2e1e-8a53-4f6f-9a71-0c1a3f5d2b4e", "00000000-0000-0000-0000-000000000001"]
    assert [str(u) for u in _round_trip(runtime, "uuid[]", UuidArray(ids))] == ids


def test_the_element_type_is_the_arrays_own(runtime: Runtime) -> None:
    """Sent untyped (``%b`` with no cast), the array still says what it holds."""
    with runtime.log.datastore.transaction(commit=False) as cur:
        cur.execute(
            "SELECT pg_typeof(%b)::text AS a, pg_typeof(%b)::text AS b, pg_typeof(%b)::text AS c",
            (Int8Array([1]), TextArray(["x"]), UuidArray([])),
        )
        row = cur.fetchone()
    assert row == {"a": "bigint[]", "b": "text[]", "c": "uuid[]"}


@pytest.mark.parametrize(
    ("array", "cast"),
    [
        (UuidArray(["not a uuid"]), "uuid[]"),
        (Int8Array([2**63]), "bigint[]"),
        (TextArray([b"bytes"]), "text[]"),  # type: ignore[list-item]
        (ByteaArray(["text"]), "bytea[]"),  # type: ignore[list-item]
    ],
    ids=["uuid", "int8", "text", "bytea"],
)
def test_an_element_the_type_cannot_hold_is_a_data_error(
    runtime: Runtime, array: list[Any], cast: str
) -> None:
    """As the database would refuse it: a group commit isolates a write whose
    statement raises a psycopg error, and fails only that write."""
    with runtime.log.datastore.pool.connection() as conn, pytest.raises(psycopg.DataError):
        conn.execute(f"SELECT %b::{cast}", (array,))


def test_psycopgs_own_array_dumpers_stay_in_place() -> None:
    """Registering the typed arrays replaces none of the dumpers psycopg looks up
    by type (binary ``COPY`` does, for ``reflections.source_ids`` in a rebuild)."""
    for cls, cast, _ in _CASES:
        ours = psycopg.adapters.get_dumper(cls, PyFormat.BINARY)
        oid = psycopg.postgres.types[cast.removesuffix("[]")].array_oid
        assert psycopg.adapters.get_dumper_by_oid(oid, Format.BINARY) is not ours, cast
