"""Many values of one kind through :func:`storable`: a write's dependency rows (often
hundreds of one type) and long lists are checked by kind and column by column, and
must come out exactly as a few do."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from palimpsest.projections.store.storable import storable
from tests.projections.store.test_storable import (
    _UNSTORABLE,
    Kind,
    Pair,
    Row,
    Single,
    _reference,
    _strings,
    _text,
    _values,
)

_plain = st.one_of(_text, st.uuids(), st.integers(), st.none(), st.booleans())
_column = st.one_of(_plain, st.sampled_from(Kind), st.tuples(_plain), st.lists(_plain, max_size=2))
_many = st.one_of(
    st.lists(_plain, min_size=17, max_size=40),
    st.lists(st.builds(Row, _plain, _column), min_size=17, max_size=40),
    st.lists(st.builds(Single, _plain), min_size=17, max_size=40),
    st.lists(st.builds(Pair, _plain, _plain), min_size=17, max_size=40),
    st.frozensets(st.builds(Row, _plain, _plain), min_size=17, max_size=40),
    st.lists(_values, min_size=17, max_size=25),
    st.dictionaries(_text, _plain, min_size=17, max_size=40),
)


def _unchanged(value: Any) -> bool:
    return not any(set(s) & _UNSTORABLE or type(s) is not str for s in _strings(value))


@given(_many)
@example([Row("a", "b")] * 16 + [Row("c", "\x00")])
@example([Row("a", "b")] * 16 + [Row(Kind.NOTE, "b")])
@example([Row("a", "b")] * 16 + [Row("a", ("\ud800",))])
@example(["a"] * 16 + ["\udfff"])
def test_many_values_come_out_as_a_few_do(value: Any) -> None:
    stored = storable(value)
    assert stored == _reference(value)
    assert (stored is value) == _unchanged(value)
    assert not any(set(s) & _UNSTORABLE or type(s) is not str for s in _strings(stored))
