"""``/v1/recall``: find memories by meaning and by words."""

from __future__ import annotations

import time
from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, Response

from palimpsest.api._admission import OVER_CAP, HolderDep
from palimpsest.api._cursor import decode_recall_cursor, encode_recall_cursor
from palimpsest.api._deps import CallerDep, ClockDep, RuntimeDep
from palimpsest.api._plain_requests import JsonAnswer, plain_route
from palimpsest.api._waiting import await_drains
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.schemas import RecallCreate, RecallPublic
from palimpsest.domain.errors import InvalidInputError
from palimpsest.projections.recall.caught_up import WAIT_S, caught_up
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.reflections import list_reflections

__all__ = [
    "recall_memories",
    "router",
]

router = APIRouter(prefix="/v1/recall", tags=["recall"])

_DEEPEST = 1000
"""The most memories one recall pages through (``offset + k``): ranking a page ranks
every memory above it."""


def _offset(body: RecallCreate) -> int:
    """Return how many memories earlier pages held (0 without a cursor).

    Raises:
        InvalidInputError: a bad or foreign cursor, or a page beyond :data:`_DEEPEST`.
    """
    if body.cursor is None:
        return 0
    offset = decode_recall_cursor(body.cursor, _request(body))
    if offset + body.k > _DEEPEST:
        msg = f"recall pages through at most {_DEEPEST} memories"
        raise InvalidInputError(msg)
    return offset


def _request(body: RecallCreate) -> str:
    """The recall a cursor belongs to: everything but the page (``cursor`` and ``k``)
    and ``after`` (a caller's next page may follow a write of its own)."""
    return body.model_dump_json(exclude={"cursor", "k", "after"})


_RECALL = JsonAnswer(RecallPublic)


@plain_route(router, "POST", "", answers=_RECALL, responses=OVER_CAP)
async def recall_memories(
    body: RecallCreate,
    caller: CallerDep,
    holder: HolderDep,
    runtime: RuntimeDep,
    clock: ClockDep,
) -> Response:
    """Return the `k` current memories that best match `query`, filtered by type, scope,
    project (or `project_under`: a project and those below it), topic and
    `min_similarity` inside the database (before the search keeps its best, never
    after), best first: by meaning
    and words fused (`mode` hybrid, the default: reciprocal rank fusion), by meaning
    (`vector`) or by words (`text`, full-text search, which finds identifiers such as
    `PAL-123`). Equal scores (to 3 decimals) rank by salience (a pinned memory
    first, then the score), then recency, then id; a memory that a newer one of its
    type, scope and project may supersede (`possibly_superseded_by`, until the pair is
    settled) ranks right below it. Each item's `rank` says what decided, its place by
    meaning and by words, and its `relevance`: how well it matches, comparable across
    recalls. Without `min_similarity`, memories that match neither by meaning nor by
    words are left out: a query about nothing stored answers no items.
    `next_cursor` asks for the next page. Each current memory returned counts as an
    access (it feeds salience); its `salience` is the score in [0, 1]. A memory whose
    revision or embedding has not caught up is returned `pending`, without content;
    archived ones only with `include_archived`, flagged in their belief. With `after`
    (the `position` a write answered) the recall first waits, at most 5 s, until
    every write up to it is indexed, holding no thread. Similarity only recalls: it
    never decides anything. `Server-Timing` reports the wait, the query's embedding
    and the search separately, and the search's two parts: `index` (the searches) and
    `rank` (fusion, the floor, possible supersessions, the answers)."""
    offset = _offset(body)
    tenant_id = caller.tenant_id
    if body.after is None:
        return _answered(await in_thread(_answer, body, runtime, tenant_id, clock(), offset, None))
    after = body.after
    started = time.perf_counter()

    def check() -> bool:
        return caught_up(runtime.log, tenant_id, after)

    def first_try() -> tuple[bool, tuple[bytes, str] | None]:
        # Usually caught up already: then the check and the recall share a thread hop.
        if not check():
            return False, None
        return True, _answer(body, runtime, tenant_id, clock(), offset, True, 0.0)

    ready, answered = await in_thread(first_try)
    if answered is not None:
        return _answered(answered)
    ready = await await_drains(runtime, tenant_id, check, bool, WAIT_S, holder, first=ready)
    waited_ms = (time.perf_counter() - started) * 1000
    return _answered(
        await in_thread(_answer, body, runtime, tenant_id, clock(), offset, ready, waited_ms)
    )


def _answered(answer: tuple[bytes, str]) -> Response:
    """The response of :func:`_answer`'s JSON and ``Server-Timing``."""
    body, timing = answer
    return _RECALL.response(body, [(b"server-timing", timing.encode())])


def _answer(
    body: RecallCreate,
    runtime: Runtime,
    tenant_id: UUID,
    now: datetime,
    offset: int,
    caught: bool | None,
    waited_ms: float = 0.0,
) -> tuple[bytes, str]:
    """Recall (blocking: run it on a worker thread); return the answer's JSON (made
    here, off the event loop) and its ``Server-Timing``."""
    found = recall(
        runtime.log,
        runtime.embedder,
        tenant_id,
        RecallQuery(
            body.query,
            body.k,
            body.type,
            body.scope,
            body.project,
            body.include_archived,
            body.topic,
            mode=body.mode,
            min_similarity=body.min_similarity,
            offset=offset,
            project_under=body.project_under,
        ),
        now=now,
    )
    waited = f"wait;dur={waited_ms:.2f}, " if caught is not None else ""
    timing = f"{waited}embed;dur={found.embed_ms:.2f}, search;dur={found.search_ms:.2f}" + "".join(
        f", {name};dur={ms:.2f}" for name, ms in found.timings.items()
    )  # the search's parts after it: which part of a slow search was slow
    following = offset + body.k
    more = len(found.items) == body.k and following < _DEEPEST
    answer = RecallPublic(
        items=found.items,
        strategy=found.strategy,
        model=runtime.embedder.model_id,
        mode=body.mode,
        next_cursor=encode_recall_cursor(following, _request(body)) if more else None,
        reflections=list_reflections(runtime.log, tenant_id, drawn_from=[i.id for i in found.items])
        if body.include_reflections
        else None,
        caught_up=caught,
    )
    return _RECALL.dump(answer), timing
