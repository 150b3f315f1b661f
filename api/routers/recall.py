"""``/v1/recall``: find memories by meaning."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import CallerDep, ClockDep, RuntimeDep
from api.schemas import RecallCreate, RecallPublic
from projections.recall.search import RecallQuery, recall

__all__ = [
    "recall_memories",
    "router",
]

router = APIRouter(prefix="/v1/recall", tags=["recall"])


@router.post("", response_model=RecallPublic)
def recall_memories(
    body: RecallCreate, response: Response, caller: CallerDep, runtime: RuntimeDep, clock: ClockDep
) -> RecallPublic:
    """Return the `k` current memories most similar to `query`, filtered by type, scope,
    project and topic inside the database, best first. Equal similarities (to 3
    decimals) rank by salience (a pinned memory first, then the score), then recency,
    then id; each item says which decided. Each current memory returned counts as an
    access (it feeds salience); its `salience` is the score in [0, 1]. A memory whose
    revision or embedding has not caught up is returned `pending`, without content;
    archived ones only with `include_archived`, flagged in their belief. Similarity
    only recalls: it never decides anything. `Server-Timing` reports the query's
    embedding and the search separately."""
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
        ),
        now=clock(),
    )
    response.headers["Server-Timing"] = (
        f"embed;dur={found.embed_ms:.2f}, search;dur={found.search_ms:.2f}"
    )
    return RecallPublic(items=found.items, strategy=found.strategy, model=runtime.embedder.model_id)
