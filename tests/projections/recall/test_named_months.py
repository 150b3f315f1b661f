"""The months a query names: every written form of a date a question uses names its
month (and year), and words that only look like a month do not."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.projections.recall._fusion import TIME_BONUS, Fused, dated
from palimpsest.projections.recall._named_months import NamedMonth, named_months

_NAMES = tuple(calendar.month_name)[1:]
_FORMS = (
    "What happened on {day} {name}, {year}?",
    "What happened on {name} {day}, {year}?",
    "What did we decide in {name} {year}?",
    "What did we decide in {name} of {year}?",
    "Anything from the {day}th of {name} {year}?",
    "notes from {short} {day} {year}",
    "notes from {iso}",
)


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2199, 12, 31)), st.sampled_from(_FORMS))
def test_a_written_date_names_its_month_and_year(day: date, form: str) -> None:
    name = _NAMES[day.month - 1]
    text = form.format(day=day.day, name=name, year=day.year, short=name[:3], iso=day.isoformat())
    assert named_months(text) == (NamedMonth(day.month, day.year),), text


@pytest.mark.parametrize("name", _NAMES)
def test_a_month_alone_names_it_in_any_year(name: str) -> None:
    month = _NAMES.index(name) + 1
    assert named_months(f"When did Melanie go camping in {name}?") == (NamedMonth(month),)
    if name not in ("May", "March"):
        assert named_months(f"what happened in {name.lower()}") == (NamedMonth(month),)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("May I see my notes on the release?", ()),
        ("Where may I park?", ()),
        ("They march on Sunday", ()),
        ("What did Jan say about the Mar-a-Lago trip?", ()),
        ("Notes filed under dec", ()),
        ("May 2023: what changed?", (NamedMonth(5, 2023),)),
        ("what did we ship in may 2023", (NamedMonth(5, 2023),)),
        ("the march 3 meeting", (NamedMonth(3),)),
        ("Did we meet in March?", (NamedMonth(3),)),
        ("Between June and August 2022", (NamedMonth(6), NamedMonth(8, 2022))),
        ("June, then June again", (NamedMonth(6),)),
        ("ticket PAL-2023-05 and build 2023-13-01", ()),
        ("Sept. 5th", (NamedMonth(9),)),
    ],
)
def test_what_names_a_month_and_what_only_looks_like_one(
    text: str, expected: tuple[NamedMonth, ...]
) -> None:
    assert named_months(text) == expected


_NOT_MONTHS = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60
).filter(
    lambda t: (
        not any(name.lower()[:3] in t.lower() for name in _NAMES)
    )  # no month's name or abbreviation anywhere
)


@given(_NOT_MONTHS)
def test_text_without_a_month_names_none(text: str) -> None:
    assert named_months(text) == ()


def test_the_bonus_goes_to_the_memories_of_the_named_months_only() -> None:
    june, august, undated = uuid4(), uuid4(), uuid4()
    places = {m: Fused(1, None, 0.5) for m in (june, august, undated)}
    times = {
        june: datetime(2023, 6, 30, 23, 59, tzinfo=UTC),
        august: datetime(2023, 8, 1, tzinfo=UTC),
        undated: None,
    }
    scored = dated(places, times, (NamedMonth(6, 2023),))
    assert scored[june].score == pytest.approx(0.5 + TIME_BONUS)
    assert scored[august].score == scored[undated].score == 0.5
    assert dated(places, times, (NamedMonth(6, 2022),)) == places
    assert dated(places, times, (NamedMonth(8), NamedMonth(6)))[august].score > 0.5
