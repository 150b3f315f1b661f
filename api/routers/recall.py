"""``/v1/recall``: find memories by meaning and by words."""

from __future__ import annotations

from fastapi import APIRouter, Response

from palimpsest.api.cursor import decode_recall_cursor, encode_recall_cursor
from palimpsest.api.deps import CallerDep, ClockDep, RuntimeDep
from palimpsest.api.schemas import RecallCreate, RecallPublic
from palimpsest.domain.errors import InvalidInputError
from palimpsest.projections.recall.search import RecallQuery, recall
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
    """The recall a cursor belongs to: everything but the page (``cursor`` and ``k``)."""
    return body.model_dump_json(exclude={"cursor", "k"})


@router.post("", response_model=RecallPublic)
def recall_memories(
    body: RecallCreate, response: Response, caller: CallerDep, runtime: RuntimeDep, clock: ClockDep
) -> RecallPublic:
    """Return the `k` current memories that best match `query`, filtered by type, scope,
    project, topic and `min_similarity` inside the database, best first: by meaning
    and words fused (`mode` hybrid, the default: reciprocal rank fusion), by meaning
    (`vector`) or by words (`text`, full-text search, which finds identifiers such as
    `PAL-123`). Equal relevance (to 3 decimals) ranks by salience (a pinned memory
    first, then the score), then recency, then id; each item's `rank` says which
    decided, and its place by meaning and by words. `next_cursor` asks for the next
    page. Each current memory returned counts as an
    access (it feeds salience); its `salience` is the score in [0, 1]. A memory whose
    revision or embedding has not caught up is returned `pending`, without content;
    archived ones only with `include_archived`, flagged in their belief. Similarity
    only recalls: it never decides anything. `Server-Timing` reports the query's
    embedding and the search separately."""
    offset = _offset(body)
    found = recall(
        runtime.log,
        runtime.embedder,
        caller.tenant_id,
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
        ),
        now=clock(),
    )
    response.headers["Server-Timing"] = (
        f"embed;dur={found.embed_ms:.2f}, search;dur={found.search_ms:.2f}"
    )
    following = offset + body.k
    more = len(found.items) == body.k and following < _DEEPEST
    return RecallPublic(
        items=found.items,
        strategy=found.strategy,
        model=runtime.embedder.model_id,
        mode=body.mode,
        next_cursor=encode_recall_cursor(following, _request(body)) if more else None,
        reflections=list_reflections(
            runtime.log, caller.tenant_id, drawn_from=[i.id for i in found.items]
        )
        if body.include_reflections
        else None,
    )
