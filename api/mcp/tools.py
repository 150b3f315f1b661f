"""The five tools every agent gets: remember, recall, revise, forget, history.

Few on purpose: an advertised tool costs every conversation context. Each
builds the HTTP API's request model from its arguments (the same rules refuse
the same values), turns it into the same write spec (:mod:`palimpsest.api.specs`) or calls
the same view, and answers an explicit model (:mod:`palimpsest.api.mcp.models`).
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from palimpsest.api.mcp.backend import Backend
from palimpsest.api.mcp.models import (
    BeliefStatus,
    DecisionResult,
    HistoryEvent,
    HistoryResult,
    HistoryVersion,
    RankReason,
    RecalledItem,
    RecallResult,
    RememberResult,
    ReviseResult,
    summarise,
)
from palimpsest.api.schemas import (
    ForgetCreate,
    MemoryCreate,
    ObservationCreate,
    RecallCreate,
    VersionCreate,
)
from palimpsest.api.schemas.common import MAX_POSITION, Label, PgText, Reason, Rfc3339
from palimpsest.api.specs import label_spec, memory_spec, observation_spec, version_spec
from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.memory import MemoryType
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.writer import WriteSpec
from palimpsest.projections.recall.recalled import RecalledCurrent, RecalledPending, RecallMode
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.views.as_of import belief_as_of, position_at
from palimpsest.projections.views.current_beliefs import current_belief
from palimpsest.projections.views.timeline import memory_history

__all__ = ["add_core_tools", "decision_result"]

Content = Annotated[str, Field(min_length=1, description="The memory's text: one claim.")]
SourceText = Annotated[
    str | None,
    Field(
        min_length=1,
        description="The text the memory comes from (a message, a document); kept as an "
        "observation, and cited as the memory's evidence.",
    ),
]
Excerpt = Annotated[
    str | None,
    Field(
        min_length=1,
        description="The passage of source_text the memory rests on, copied exactly "
        "(default: all of it).",
    ),
]
ModelId = Annotated[Label | None, Field(description="The model proposing it, if any.")]
MemoryId = Annotated[UUID, Field(description="The memory's id (from remember or recall).")]


def add_core_tools(server: MCPServer, backend: Backend) -> None:
    """Register the default tools on ``server``."""

    @server.tool(
        title="Remember",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def remember(
        ctx: Context,
        content: Content,
        type: Annotated[MemoryType, Field(description="What kind of memory.")] = "fact",
        scope: Annotated[Label, Field(description="Who or what it applies to.")] = "default",
        project: Annotated[Label | None, Field(description="A project it belongs to.")] = None,
        topic: Annotated[Label | None, Field(description="A topic to file it under.")] = None,
        source_text: SourceText = None,
        excerpt: Excerpt = None,
        source: Annotated[Label | None, Field(description="Where source_text came from.")] = None,
        model_id: ModelId = None,
    ) -> Annotated[CallToolResult, RememberResult]:
        """Store a new memory; answers its id and log position once it is durable, and
        its belief status (`pending` until revision catches up, then `current`)."""

        def call(caller: Caller) -> RememberResult:
            specs, evidence = _cited(source_text, excerpt, source)
            body = MemoryCreate.model_validate(
                {
                    "type": type,
                    "scope": scope,
                    "project": project,
                    "topic": topic,
                    "content": content,
                    "evidence": evidence,
                    "model_id": model_id,
                }
            )
            results = backend.write(caller, [*specs, memory_spec(body, len(specs))])
            created = results[-1]
            memory_id = UUID(str(created["id"]))
            return RememberResult(
                memory_id=memory_id,
                version_id=UUID(str(created["version_id"])),
                position=created["position"],
                status=backend.status(caller, memory_id),
                **_observation_fields(results),
            )

        return backend.run(ctx, call)

    @server.tool(
        name="recall",
        title="Recall",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def recall_memories(
        ctx: Context,
        query: Annotated[PgText, Field(min_length=1, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=100, description="How many memories.")] = 5,
        type: Annotated[MemoryType | None, Field(description="Only this kind.")] = None,
        scope: Annotated[Label | None, Field(description="Only this scope.")] = None,
        project: Annotated[Label | None, Field(description="Only this project.")] = None,
        topic: Annotated[Label | None, Field(description="Only this topic.")] = None,
        include_archived: Annotated[bool, Field(description="Also forgotten ones.")] = False,
        mode: Annotated[
            RecallMode,
            Field(description="hybrid: meaning and words; vector: meaning; text: words."),
        ] = "hybrid",
    ) -> Annotated[CallToolResult, RecallResult]:
        """Find the memories that best match `query` by meaning and by words (names,
        numbers, ids), best first: each with its id, text, belief and why it ranks."""

        def call(caller: Caller) -> RecallResult:
            body = RecallCreate.model_validate(
                {
                    "query": query,
                    "k": k,
                    "type": type,
                    "scope": scope,
                    "project": project,
                    "topic": topic,
                    "include_archived": include_archived,
                    "mode": mode,
                }
            )
            runtime = backend.runtime
            found = recall(
                runtime.log,
                runtime.embedder,
                caller.tenant_id,
                RecallQuery(
                    text=body.query,
                    k=body.k,
                    memory_type=body.type,
                    scope=body.scope,
                    project=body.project,
                    include_archived=body.include_archived,
                    topic=body.topic,
                    mode=body.mode,
                ),
                now=backend.clock(),
            )
            return RecallResult(
                items=[_recalled(item) for item in found.items], model=runtime.embedder.model_id
            )

        return backend.run(ctx, call)

    @server.tool(
        title="Revise",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def revise(
        ctx: Context,
        memory_id: MemoryId,
        content: Content,
        source_text: SourceText = None,
        excerpt: Excerpt = None,
        source: Annotated[Label | None, Field(description="Where source_text came from.")] = None,
        model_id: ModelId = None,
    ) -> Annotated[CallToolResult, ReviseResult]:
        """Record a new version of a memory (the old ones stay in its history)."""

        def call(caller: Caller) -> ReviseResult:
            specs, evidence = _cited(source_text, excerpt, source)
            body = VersionCreate.model_validate(
                {"content": content, "evidence": evidence, "model_id": model_id}
            )
            results = backend.write(caller, [*specs, version_spec(memory_id, body, len(specs))])
            created = results[-1]
            return ReviseResult(
                memory_id=memory_id,
                version_id=UUID(str(created["version_id"])),
                position=created["position"],
                status=backend.status(caller, memory_id),
                **_observation_fields(results),
            )

        return backend.run(ctx, call)

    @server.tool(
        title="Forget",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True
        ),
    )
    def forget(
        ctx: Context,
        memory_id: MemoryId,
        reason: Annotated[Reason, Field(description="Why it should be forgotten.")],
    ) -> Annotated[CallToolResult, DecisionResult]:
        """Forget a memory: archived by a recorded decision, reversibly (an
        administrator can restore it; as-of reads still see it)."""

        def call(caller: Caller) -> DecisionResult:
            body = ForgetCreate.model_validate({"reason": reason})
            [decided] = backend.write(caller, [label_spec(memory_id, "forget", body)])
            return decision_result(backend, caller, decided, memory_id)

        return backend.run(ctx, call)

    @server.tool(title="History", annotations=ToolAnnotations(read_only_hint=True))
    def history(
        ctx: Context,
        memory_id: MemoryId,
        as_of: Annotated[
            Rfc3339 | None, Field(description="What was believed at this time (RFC 3339).")
        ] = None,
        at_position: Annotated[
            int | None, Field(ge=0, le=MAX_POSITION, description="...or at this log position.")
        ] = None,
    ) -> Annotated[CallToolResult, HistoryResult]:
        """What was believed about a memory and when: every version and event, and the
        belief now, or at a past time or log position."""

        def call(caller: Caller) -> HistoryResult:
            log, tenant = backend.runtime.log, caller.tenant_id
            record = memory_history(log, tenant, memory_id)
            versions = [
                HistoryVersion(
                    version_id=v.version_id,
                    number=v.number,
                    content=v.content,
                    position=v.position,
                    recorded_at=v.recorded_at,
                )
                for v in record.versions
            ]
            texts = {v.version_id: v.content for v in versions}
            position = at_position
            if as_of is not None:  # both given: the earlier, as the HTTP API reads them
                by_time = position_at(log, tenant, as_of)
                position = by_time if position is None else min(position, by_time)
            answer: Any = (
                current_belief(log, tenant, memory_id, now=backend.clock)
                if position is None
                else belief_as_of(log, tenant, memory_id, position)
            )
            status: BeliefStatus = answer.status
            belief = getattr(answer, "belief", None)
            summary = None if belief is None else summarise(belief)
            content = None
            if summary is not None and summary.version_id is not None:
                content = texts.get(summary.version_id)
            return HistoryResult(
                memory_id=memory_id,
                type=record.memory_type,
                scope=record.scope,
                project=record.project,
                topic=record.topic,
                versions=versions,
                events=[
                    HistoryEvent(
                        type=e.type,
                        position=e.position,
                        recorded_at=e.recorded_at,
                        principal_id=e.principal_id,
                    )
                    for e in record.events
                ],
                status=status,
                position=getattr(answer, "position", None),
                belief=summary,
                content=content,
            )

        return backend.run(ctx, call)


def decision_result(
    backend: Backend, caller: Caller, decided: dict[str, Any], memory_id: UUID | None
) -> DecisionResult:
    """Return a decision's outcome, with the memory's belief status after it."""
    return DecisionResult(
        decision_id=UUID(str(decided["id"])),
        kind=str(decided["kind"]),
        memory_id=memory_id,
        position=decided["position"],
        replayed=bool(decided["replayed"]),
        status=None if memory_id is None else backend.status(caller, memory_id),
    )


def _cited(
    source_text: str | None, excerpt: str | None, source: str | None
) -> tuple[list[WriteSpec], list[dict[str, Any]]]:
    """Return the capture of ``source_text`` (item 0 of the write) and the evidence
    citing ``excerpt`` in it (all of it by default), or nothing without a source text.

    Raises:
        InvalidInputError: an excerpt without a source text, or not found in it.
    """
    if source_text is None:
        if excerpt is not None:
            msg = "an excerpt needs the source_text it is copied from"
            raise InvalidInputError(msg)
        return [], []
    observation = ObservationCreate.model_validate({"content": source_text, "source": source})
    quoted = source_text if excerpt is None else excerpt
    start = source_text.find(quoted)
    if start < 0:
        msg = "the excerpt does not occur in source_text: copy the passage exactly"
        raise InvalidInputError(msg)
    # Offsets are code points, as Python indexes strings and the API counts them.
    span = {"observation_id": "$0", "start": start, "end": start + len(quoted)}
    return [observation_spec(observation)], [span]


def _observation_fields(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the observation's id and position when the write captured one first."""
    if len(results) < 2:
        return {}
    captured = results[0]
    return {
        "observation_id": UUID(str(captured["id"])),
        "observation_position": captured["position"],
    }


def _recalled(item: RecalledCurrent | RecalledPending) -> RecalledItem:
    rank = item.rank
    current = isinstance(item, RecalledCurrent)
    return RecalledItem(
        id=item.id,
        status=item.status,
        type=item.memory_type,
        scope=item.scope,
        project=item.project,
        topic=item.topic,
        content=item.content if isinstance(item, RecalledCurrent) else None,
        belief=summarise(item.belief) if isinstance(item, RecalledCurrent) else None,
        why=RankReason(
            mode=rank.mode,
            relevance=rank.relevance,
            similarity=rank.similarity,
            vector_rank=rank.vector_rank,
            text_rank=rank.text_rank,
            salience=rank.salience if current else None,
            pinned=rank.pinned,
            recency=rank.recency,
            decided_by=rank.decided_by,
        ),
    )
