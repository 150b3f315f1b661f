"""Which edges may join two memories."""

from __future__ import annotations

from typing import Literal, get_args

from palimpsest.domain.errors import EdgeNotAllowedError

__all__ = ["EDGE_KINDS", "EdgeKind", "check_edge"]

EdgeKind = Literal["supersedes", "conflicts_with", "extends", "derived_from"]
EDGE_KINDS: tuple[EdgeKind, ...] = get_args(EdgeKind)


def check_edge(kind: str, *, source_type: str, target_type: str, same_memory: bool) -> None:
    """Refuse an edge that the model does not allow.

    ``event`` memories record what happened; they are never superseded, in
    conflict or consolidated, so either end being an ``event`` allows only
    ``extends``.

    Raises:
        EdgeNotAllowedError: the kind is unknown, the edge is a loop, or it
            touches an ``event`` memory with a kind other than ``extends``.
    """
    if kind not in EDGE_KINDS:
        msg = f"unknown edge kind {kind!r}; expected one of {', '.join(EDGE_KINDS)}"
        raise EdgeNotAllowedError(msg)
    if same_memory:
        msg = "a memory cannot have an edge to itself"
        raise EdgeNotAllowedError(msg)
    if kind != "extends" and "event" in (source_type, target_type):
        msg = f"event memories accept only 'extends' edges, not {kind!r}"
        raise EdgeNotAllowedError(msg)
