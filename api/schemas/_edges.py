"""``/v1/memories/{id}/edges/{edge_id}/retract``: retract an edge, by a decision."""

from __future__ import annotations

from palimpsest.api.schemas._common import Reason, RequestBody

__all__ = ["EdgeRetract"]


class EdgeRetract(RequestBody):
    """Retract an edge; the reason is recorded with the decision."""

    reason: Reason | None = None
