"""The daily schedule: which cron lines it accepts, and when a job is due."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.schedule import DailySchedule, parse_daily


def test_the_seeds_line_is_daily_at_four_thirty() -> None:
    assert parse_daily("30 4 * * *") == DailySchedule(time(4, 30))
    assert parse_daily("  0  0 * * *  ") == DailySchedule(time(0, 0))


@pytest.mark.parametrize(
    "line",
    [
        "",
        "30 4 * *",
        "30 4 * * * *",
        "30 4 1 * *",
        "30 4 * * 1",
        "*/5 4 * * *",
        "60 4 * * *",
        "30 24 * * *",
        "-1 4 * * *",
        "30 four * * *",
        "1e1 4 * * *",
    ],
)
def test_anything_but_a_daily_line_is_refused(line: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_daily(line)


def test_due_times_around_the_hour() -> None:
    schedule = parse_daily("30 4 * * *")
    before = datetime(2026, 10, 1, 4, 29, tzinfo=UTC)
    at = datetime(2026, 10, 1, 4, 30, tzinfo=UTC)
    assert schedule.next_after(before) == at
    assert schedule.next_after(at) == at + timedelta(days=1)
    assert schedule.last_due(at) == at
    assert schedule.last_due(before) == at - timedelta(days=1)


moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(moments, st.integers(0, 23), st.integers(0, 59))
def test_next_and_last_bracket_every_moment(moment: datetime, hour: int, minute: int) -> None:
    schedule = parse_daily(f"{minute} {hour} * * *")
    following, last = schedule.next_after(moment), schedule.last_due(moment)
    assert last <= moment < following
    assert following - last == timedelta(days=1)
    assert following.time() == last.time() == time(hour, minute)
