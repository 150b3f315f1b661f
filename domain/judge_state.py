"""What the forgetting pass shows a judge: the items, their rendered state, and its batches.

The state is the seed's shape (``../shared/seeds``, "Judgment: the state
shape"): a ``now`` and a list of items, each a *single* (a stale memory and
its newer neighbours) or a *pair* (an older and a newer memory that may
conflict). :func:`render_state` turns items into that JSON-ready dict, and
:func:`batches` splits items into batches whose rendered request stays under
a size limit. Pure: the caller passes ``now`` and the limits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.verdicts import REF_PATTERN, Verdict

__all__ = [
    "JSONValue",
    "JUDGED_CONTENT_CHARS",
    "JudgeItem",
    "MAX_BATCH_CHARS",
    "MAX_BATCH_ITEMS",
    "MemoryView",
    "NEIGHBOUR_CONTENT_CHARS",
    "PairItem",
    "SingleItem",
    "batches",
    "cut",
    "neighbour_ref",
    "render_state",
    "state_chars",
    "verdict_memories",
]

JUDGED_CONTENT_CHARS = 1_200
"""The judged memory's content is cut to this many characters (both sides of a pair)."""
NEIGHBOUR_CONTENT_CHARS = 300
"""Each newer neighbour's content is cut to this many characters."""
MAX_BATCH_ITEMS = 12
"""Items per judge call, at most (the seed's batch)."""
MAX_BATCH_CHARS = 48_000
"""A batch whose rendered request would pass this many characters is split."""

JSONValue = str | int | float | bool | None | list["JSONValue"] | dict[str, "JSONValue"]
"""A value :func:`json.dumps` can write."""

_REF = re.compile(REF_PATTERN)
_ELLIPSIS = "…"


@dataclass(frozen=True)
class MemoryView:
    """One memory as a judge sees it: its current version's text and its times."""

    memory_id: UUID
    memory_type: str
    scope: str
    project: str | None
    topic: str | None
    content: str
    """The current version's full text; rendering cuts it."""
    recorded_at: datetime
    """The memory's time: the latest ``captured_at`` of its current version's
    evidence, else the version's recorded time (timezone-aware)."""
    last_touched_at: datetime | None = None
    """When it was last reviewed or touched, if ever (timezone-aware)."""
    version_id: UUID | None = None
    """The version the judge saw, for the proposal to record (not rendered)."""
    content_digest: str | None = None
    """That version's content digest, for the proposal to record (not rendered)."""


@dataclass(frozen=True)
class SingleItem:
    """A stale memory, with the newer memories of its type, scope and project."""

    ref: str
    memory: MemoryView
    newer: tuple[MemoryView, ...] = ()
    """Most similar first (the candidate query keeps up to 3); each is rendered
    with the ref :func:`neighbour_ref` gives it."""


@dataclass(frozen=True)
class PairItem:
    """Two memories of one type, scope and project that may conflict, newer second."""

    ref: str
    older: MemoryView
    newer: MemoryView
    similarity: float
    """Their embeddings' cosine similarity."""


JudgeItem = SingleItem | PairItem
"""One item of the state."""


def neighbour_ref(item: SingleItem, index: int) -> str:
    """Return the ref of a single item's ``index``-th newer neighbour (``s0`` → ``s0n1``)."""
    return f"{item.ref}n{index}"


def cut(text: str, limit: int) -> str:
    """Return ``text`` cut to at most ``limit`` characters, ending in ``…`` when cut.

    Characters are Unicode code points, as Python counts them. The ellipsis is
    inside the limit, so a cut text is exactly ``limit`` long and the judge can
    tell it was cut.
    """
    if len(text) <= limit:
        return text
    if limit < 1:
        return ""
    return text[: limit - 1] + _ELLIPSIS


def _timestamp(moment: datetime) -> str:
    if moment.tzinfo is None or moment.utcoffset() is None:
        msg = f"the time {moment.isoformat()} has no timezone; pass an aware datetime"
        raise InvalidInputError(msg)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _optional_timestamp(moment: datetime | None) -> str | None:
    return None if moment is None else _timestamp(moment)


def _judged(view: MemoryView) -> dict[str, JSONValue]:
    return {
        "type": view.memory_type,
        "scope": view.scope,
        "project": view.project,
        "topic": view.topic,
        "content": cut(view.content, JUDGED_CONTENT_CHARS),
        "recordedAt": _timestamp(view.recorded_at),
        "lastTouchedAt": _optional_timestamp(view.last_touched_at),
    }


def _side(view: MemoryView) -> dict[str, JSONValue]:
    return {
        "type": view.memory_type,
        "topic": view.topic,
        "content": cut(view.content, JUDGED_CONTENT_CHARS),
        "recordedAt": _timestamp(view.recorded_at),
    }


def _neighbour(ref: str, view: MemoryView) -> dict[str, JSONValue]:
    return {
        "ref": ref,
        "type": view.memory_type,
        "topic": view.topic,
        "content": cut(view.content, NEIGHBOUR_CONTENT_CHARS),
        "recordedAt": _timestamp(view.recorded_at),
    }


def _render_item(item: JudgeItem) -> dict[str, JSONValue]:
    if isinstance(item, SingleItem):
        return {
            "ref": item.ref,
            "kind": "single",
            "memory": _judged(item.memory),
            "newer": [
                _neighbour(neighbour_ref(item, i), view) for i, view in enumerate(item.newer)
            ],
        }
    return {
        "ref": item.ref,
        "kind": "pair",
        "older": _side(item.older),
        "newer": _side(item.newer),
        "similarity": round(item.similarity, 2),
    }


def _check_refs(items: Sequence[JudgeItem]) -> None:
    seen: set[str] = set()
    for item in items:
        refs = [item.ref]
        if isinstance(item, SingleItem):
            refs += [neighbour_ref(item, i) for i in range(len(item.newer))]
        for ref in refs:
            if not _REF.fullmatch(ref):
                msg = f"the ref {ref!r} is not of the form {REF_PATTERN}"
                raise InvalidInputError(msg)
            if ref in seen:
                msg = f"the ref {ref!r} names two things in one state; give items distinct refs"
                raise InvalidInputError(msg)
            seen.add(ref)


def render_state(now: datetime, items: Sequence[JudgeItem]) -> dict[str, JSONValue]:
    """Return the state a judge reads: ``now`` and each item, JSON-ready.

    The shape is the seed's example, key for key: a single carries ``memory``
    (type, scope, project, topic, content, recordedAt, lastTouchedAt) and
    ``newer`` (ref, type, topic, content, recordedAt); a pair carries ``older``
    and ``newer`` (type, topic, content, recordedAt) and ``similarity``
    (rounded to two decimals). Times are UTC, to the second, with a ``Z``.

    Content is cut with :func:`cut`: the judged memory to 1,200 characters and
    each newer neighbour to 300. The seed is ambiguous about a pair ("the
    judged memory's content … each newer neighbour's"); its size estimate
    (a pair carries about 2,400 characters of content, twice 1,200) says both
    sides of a pair are judged, so both get 1,200. Topics are not cut (the
    seed relies on the batcher to absorb a long one); ``project`` is null
    when the memory has none, as is ``lastTouchedAt`` when it was never
    touched.

    Raises:
        InvalidInputError: a ref is malformed or names two things (an item
            and another item's neighbour included), or a time is naive.
    """
    _check_refs(items)
    rendered: list[JSONValue] = [_render_item(item) for item in items]
    return {"now": _timestamp(now), "items": rendered}


def state_chars(now: datetime, items: Sequence[JudgeItem]) -> int:
    """Return the length of the state as compact JSON, in characters."""
    state = render_state(now, items)
    return len(json.dumps(state, ensure_ascii=False, separators=(",", ":")))


def batches(
    now: datetime,
    items: Sequence[JudgeItem],
    *,
    max_items: int = MAX_BATCH_ITEMS,
    max_chars: int = MAX_BATCH_CHARS,
    measure: Callable[[datetime, Sequence[JudgeItem]], int] = state_chars,
) -> list[list[JudgeItem]]:
    """Split ``items`` into batches of at most ``max_items`` whose request measures at most
    ``max_chars``.

    ``measure`` is the size of what is actually sent for a batch: a judge
    client passes its own (the whole request body, prompt and state); the
    default is the compact JSON state alone. Items keep their order and fill
    each batch greedily: a batch closes when the next item would pass either
    limit. An item that alone measures more than ``max_chars`` still goes, as
    a batch of one: it cannot be split, and dropping it silently would hide
    it from the pass (its content is already cut, so only an extreme topic
    gets there).

    Raises:
        InvalidInputError: a limit is below 1, or an item cannot be rendered
            (see :func:`render_state`).
    """
    if max_items < 1 or max_chars < 1:
        msg = f"batch limits must be at least 1, not {max_items} items, {max_chars} chars"
        raise InvalidInputError(msg)
    _check_refs(items)
    out: list[list[JudgeItem]] = []
    current: list[JudgeItem] = []
    for item in items:
        if current and (len(current) >= max_items or measure(now, [*current, item]) > max_chars):
            out.append(current)
            current = []
        current.append(item)
    if current:
        out.append(current)
    return out


def verdict_memories(item: JudgeItem, verdict: Verdict) -> tuple[UUID, UUID | None]:
    """Return the memory a verdict is about, and the memory it relates it to.

    A single's verdict is about its memory; its supersede or conflict names a
    newer neighbour by ref. A pair's verdict is about the older side, related
    to the newer for supersede and conflict. Keep and archive relate nothing.

    Raises:
        InvalidInputError: the verdict is for another item, or a single's
            supersede or conflict names no neighbour of the item.
    """
    if verdict.ref != item.ref:
        msg = f"the verdict for {verdict.ref!r} is not about the item {item.ref!r}"
        raise InvalidInputError(msg)
    relates = verdict.action in ("supersede", "conflict")
    if isinstance(item, PairItem):
        return item.older.memory_id, item.newer.memory_id if relates else None
    if not relates:
        return item.memory.memory_id, None
    for i, view in enumerate(item.newer):
        if neighbour_ref(item, i) == verdict.related_ref:
            return item.memory.memory_id, view.memory_id
    msg = f"the {verdict.action} verdict for {item.ref!r} names no newer memory of it"
    raise InvalidInputError(msg)
