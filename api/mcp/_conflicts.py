"""What ``remember`` tells the agent about the memories its new one may conflict with.

The agent calling palimpsest is a language model: it can judge, at no cost to us,
whether "now prefers light mode" replaces "prefers dark mode". So ``remember``
waits, bounded, for the new version's potential contradictions (the HTTP API's
query, :func:`palimpsest.projections.views.candidates.potential_contradictions`,
which needs the version's embedding, widened for a judge: also the new memory's
nearest of its kind below the conflict floor, and every pair recall will mark),
answers them with their text, and says what to do: settle each one.

The wait is ``PALIMPSEST_MCP_CONFLICT_WAIT_S`` at most (1 s by default, as
``?candidates=wait`` waits over HTTP), and only where a drain is known to run to
embed the version; it ends as soon as they are ready. It holds no thread: it
awaits the tenant's publication notices
(:func:`palimpsest.api._waiting.await_drains`). docs/benchmarks.md has what it
adds to a remember.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.api._waiting import await_drains
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.mcp._models import ConflictsStatus, PotentialConflict
from palimpsest.projections.views.candidates import Candidates, potential_contradictions
from palimpsest.projections.views.current_beliefs import ListedCurrentBelief, list_beliefs
from palimpsest.projections.views.listing import MemoryFilter
from palimpsest.projections.views.version_texts import version_events

if TYPE_CHECKING:
    from palimpsest.api.mcp._backend import Backend
    from palimpsest.projections.commands.caller import Caller

__all__ = [
    "MAX_CONFLICTS",
    "await_conflicts",
    "conflicts_status",
    "describe_conflicts",
    "next_step",
]

MAX_CONFLICTS = 10
"""The most potential conflicts one answer lists (the most similar): each costs the
agent's context, and the floor rarely finds more (docs/candidates.md: p90 6)."""


async def await_conflicts(
    backend: Backend, caller: Caller, memory_id: UUID, version_id: UUID
) -> Candidates:
    """Return the potential contradictions of ``memory_id``'s version ``version_id``:
    ``ready`` once it is embedded, waiting up to ``backend.conflict_wait_s`` where a
    drain runs to embed it (else one look), ``pending`` if it was not in time."""
    runtime = backend.runtime

    def look() -> Candidates:
        return potential_contradictions(
            runtime.log,
            caller.tenant_id,
            memory_id,
            version_id,
            runtime.embedding.conflict_floor,
            to_judge=True,
        )

    if not backend.drains:
        return await in_thread(look)
    return await await_drains(
        runtime,
        caller.tenant_id,
        look,
        lambda found: found.status == "ready",
        backend.conflict_wait_s,
    )


def describe_conflicts(
    backend: Backend, caller: Caller, found: Candidates
) -> list[PotentialConflict]:
    """Return the candidates of ``found`` as the agent reads them, most similar first
    (at most :data:`MAX_CONFLICTS`): each current memory's text, type, scope and when
    its text was recorded. One that stopped being current meanwhile is left out."""
    best = sorted(found.items, key=lambda c: (-c.similarity, str(c.memory_id)))[:MAX_CONFLICTS]
    if not best:
        return []
    log, tenant = backend.runtime.log, caller.tenant_id
    listed, _ = list_beliefs(
        log,
        tenant,
        MemoryFilter(ids=tuple(c.memory_id for c in best)),
        limit=len(best),
        after=None,
        now=backend.clock(),
    )
    current = {i.id: i for i in listed if isinstance(i, ListedCurrentBelief)}
    events = version_events(log, tenant, {c.memory_id: c.version_id for c in best})
    described = []
    for candidate in best:
        memory = current.get(candidate.memory_id)
        recorded = events.get(candidate.memory_id)
        if memory is None or memory.content is None or recorded is None:
            continue
        if str(memory.belief["current_version_id"]) != str(candidate.version_id):
            continue  # revised since it was embedded: its text is not what matched
        described.append(
            PotentialConflict(
                memory_id=candidate.memory_id,
                content=memory.content,
                type=memory.memory_type,
                scope=memory.scope,
                project=memory.project,
                recorded_at=recorded.timestamp,
                similarity=candidate.similarity,
            )
        )
    return described


def conflicts_status(found: Candidates) -> ConflictsStatus:
    """Return whether ``found`` was checked, could not be yet, or never is."""
    if found.status == "pending":
        return "pending"
    return "never" if found.reason is not None else "ready"


def next_step(memory_id: UUID, status: ConflictsStatus, conflicts: list[PotentialConflict]) -> str:
    """Return what the agent should do now about the new memory's potential conflicts."""
    if status == "never":
        return "Memories of this type are not checked for conflicts: nothing to settle."
    if status == "pending":
        return (
            "The new memory could not be compared with existing ones yet. Recall it in a "
            "moment: a similar older memory then shows up beside it, and you can settle it."
        )
    if not conflicts:
        return "No existing memory of this type and scope is close to it: nothing to settle."
    count = "1 existing memory" if len(conflicts) == 1 else f"{len(conflicts)} existing memories"
    return (
        f"{count} may conflict with this one (potential_conflicts). For each, decide from "
        "the texts: if the new memory replaces it, call settle with "
        f'memory_id="{memory_id}", other_id=<its memory_id>, resolution="supersedes"; if '
        'both hold, call settle with resolution="both_stand". Give the reason in words. '
        "Ask the user when you cannot tell."
    )
