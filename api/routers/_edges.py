"""``/v1/memories/{id}/edges/{edge_id}``: retract an edge, by a recorded decision."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends

from palimpsest.api._deps import WriteDep
from palimpsest.api._specs import edge_retract_spec, requires
from palimpsest.api.schemas import DecisionOutcome, EdgeRetract
from palimpsest.projections.commands.memory import EdgeRetractSpec

__all__ = [
    "retract_edge",
    "router",
]

router = APIRouter(prefix="/v1/memories", tags=["memories"])


@router.post(
    "/{memory_id}/edges/{edge_id}/retract",
    status_code=201,
    response_model=DecisionOutcome,
    responses={200: {"model": DecisionOutcome, "description": "Replayed: nothing recorded."}},
    dependencies=[Depends(requires(EdgeRetractSpec))],
)
def retract_edge(
    memory_id: UUID, edge_id: UUID, write: WriteDep, body: EdgeRetract | None = None
) -> dict[str, Any]:
    """Retract an edge of this memory (its source), by a `retract_edge` decision with an
    optional `reason`: the edge stops counting for both memories. A superseded memory
    is no longer archived by it (this, not `restore`, undoes a supersession), a
    conflict it resolved is open again, and an as-of read before the retraction still
    sees the edge. Retracting it again replays the decision; the same kind of edge may
    be added again afterwards (a new edge)."""
    body = body or EdgeRetract()
    return write.perform(body, edge_retract_spec(memory_id, edge_id, body))
