"""Pure policies: limits, evidence, edges, retention, roles."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.digest import content_digest
from palimpsest.domain.edge import EDGE_KINDS, check_edge
from palimpsest.domain.errors import (
    ContentTooLargeError,
    EdgeNotAllowedError,
    EvidenceOutOfRangeError,
    InvalidInputError,
)
from palimpsest.domain.evidence import Excerpt, cut_excerpt
from palimpsest.domain.limits import encode_content
from palimpsest.domain.memory import MEMORY_TYPES
from palimpsest.domain.retention import retention_deadline
from palimpsest.domain.role import ROLES, can_administer, can_write


@given(
    st.text(min_size=1, max_size=200).filter(str.strip), st.integers(min_value=1, max_value=1000)
)
def test_content_is_accepted_exactly_when_its_utf8_fits(text: str, limit: int) -> None:
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(InvalidInputError):
            encode_content(text, limit_bytes=limit, what="x", allow_blank=False)
        return
    if len(encoded) <= limit:
        assert encode_content(text, limit_bytes=limit, what="x", allow_blank=False) == encoded
    else:
        with pytest.raises(ContentTooLargeError):
            encode_content(text, limit_bytes=limit, what="x", allow_blank=False)


@pytest.mark.parametrize("text", ["", " ", "\n\t "])
def test_empty_or_blank_content_is_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        encode_content(text, limit_bytes=100, what="x", allow_blank=False)


@given(st.text(max_size=50), st.integers(-5, 60), st.integers(-5, 60))
def test_excerpts_are_cut_exactly_when_offsets_are_inside(
    content: str, start: int, end: int
) -> None:
    observation = uuid4()
    if 0 <= start < end <= len(content):
        excerpt = cut_excerpt(observation, content, start, end)
        assert excerpt.excerpt_digest == content_digest(
            content[start:end].encode("utf-8", "surrogatepass")
        )
        assert Excerpt.from_event_value(excerpt.as_event_value()) == excerpt
    else:
        with pytest.raises(EvidenceOutOfRangeError):
            cut_excerpt(observation, content, start, end)


@pytest.mark.parametrize(
    ("kind", "source", "target"), list(itertools.product(EDGE_KINDS, MEMORY_TYPES, MEMORY_TYPES))
)
def test_edges_touching_an_event_memory_must_be_extends(
    kind: str, source: str, target: str
) -> None:
    allowed = kind == "extends" or "event" not in (source, target)
    if allowed:
        check_edge(kind, source_type=source, target_type=target, same_memory=False)
    else:
        with pytest.raises(EdgeNotAllowedError):
            check_edge(kind, source_type=source, target_type=target, same_memory=False)


def test_self_edges_and_unknown_kinds_are_refused() -> None:
    with pytest.raises(EdgeNotAllowedError):
        check_edge("extends", source_type="fact", target_type="fact", same_memory=True)
    with pytest.raises(EdgeNotAllowedError):
        check_edge("likes", source_type="fact", target_type="fact", same_memory=False)


@given(
    st.datetimes(timezones=st.just(UTC), max_value=datetime(9000, 1, 1)),
    st.booleans(),
    st.integers(1, 10_000),
    st.integers(1, 10_000),
)
def test_retention_deadline_is_receipt_plus_the_period_for_its_kind(
    received: datetime, transient: bool, raw_h: int, transient_h: int
) -> None:
    deadline = retention_deadline(
        received,
        transient=transient,
        raw_retention=timedelta(hours=raw_h),
        transient_retention=timedelta(hours=transient_h),
    )
    assert deadline - received == timedelta(hours=transient_h if transient else raw_h)


def test_only_writers_and_admins_write_and_only_admins_administer() -> None:
    assert [r for r in ROLES if can_write(r)] == ["writer", "admin"]
    assert [r for r in ROLES if can_administer(r)] == ["admin"]
