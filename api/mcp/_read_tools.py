"""The read tools: recall, list and history.

``recall`` finds what its caller just wrote: it first waits, bounded, until the
caller's own writes are indexed (:mod:`palimpsest.api.mcp._own_writes`).
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from palimpsest.api._cursor import decode_cursor, encode_cursor
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.mcp._arguments import MemoryId, described
from palimpsest.api.mcp._backend import Backend
from palimpsest.api.mcp._models import (
    BeliefStatus,
    HistoryEvent,
    HistoryResult,
    HistoryVersion,
    ListedItem,
    ListResult,
    RankReason,
    RecalledItem,
    RecallResult,
    summarise,
)
from palimpsest.api.mcp._own_writes import await_own_writes
from palimpsest.api.schemas import RecallCreate
from palimpsest.api.schemas._common import MAX_POSITION, Cursor, Label, PgText, Rfc3339
from palimpsest.domain.memory import MemoryType
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.recall.recalled import RecalledCurrent, RecalledPending, RecallMode
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.views.as_of import belief_as_of, position_at
from palimpsest.projections.views.current_beliefs import (
    ListedBelief,
    ListedCurrentBelief,
    current_belief,
    list_beliefs,
)
from palimpsest.projections.views.listing import MemoryFilter
from palimpsest.projections.views.timeline import memory_history

__all__ = ["add_read_tools"]

# The filters recall and list share, described once.
_TypeFilter = Annotated[MemoryType | None, Field(description="Only this kind.")]
_ScopeFilter = Annotated[Label | None, Field(description="Only this scope.")]
_ProjectFilter = Annotated[Label | None, Field(description="Only this project.")]
_TopicFilter = Annotated[Label | None, Field(description="Only this topic.")]
_IncludeArchived = Annotated[
    bool, Field(description="Also forgotten and superseded ones (flagged).")
]

RECALL = """
    Search the stored memories by meaning and by words (names, numbers, ids such as
    PAL-123), best first. Use it before answering anything the user may have told you
    before, and to find a memory's id before revise, settle or forget.

    Each item has the memory's id, its text, its belief (archived, superseded_by) and
    why it ranks where it does. An item with possibly_superseded_by may be out of date:
    a newer memory may replace it (it ranks below that one); read both and settle them.
    What you just stored is found: recall waits a moment for your latest writes
    (caught_up false: they were not searchable yet). A pending item was stored but is
    not readable yet. min_similarity leaves out weak matches by meaning.
"""

LIST = """
    List the stored memories, newest first, optionally of one type, scope, project or
    topic, a page at a time: pass next_cursor back as cursor for the next page (null on
    the last). Use it to review what is stored; to find something, recall is better.
"""

HISTORY = """
    What was believed about one memory and when: every version and event, oldest first,
    and the belief now, or at a past time (as_of) or at a write's position
    (at_position, from any write's answer). Use it when the user asks what they said
    before, or when something changed.
"""


def add_read_tools(server: MCPServer, backend: Backend) -> None:
    """Register recall, list and history on ``server``."""

    @server.tool(
        name="recall",
        title="Recall",
        description=described(RECALL),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def recall_memories(
        ctx: Context,
        query: Annotated[PgText, Field(min_length=1, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=100, description="How many memories.")] = 10,
        type: _TypeFilter = None,
        scope: _ScopeFilter = None,
        project: _ProjectFilter = None,
        topic: _TopicFilter = None,
        include_archived: _IncludeArchived = False,
        mode: Annotated[
            RecallMode,
            Field(description="hybrid: meaning and words; vector: meaning; text: words."),
        ] = "hybrid",
        min_similarity: Annotated[
            float | None,
            Field(ge=0.0, le=1.0, description="Leave out memories less similar than this (0-1)."),
        ] = None,
    ) -> Annotated[CallToolResult, RecallResult]:
        async def call(caller: Caller) -> RecallResult:
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
                    "min_similarity": min_similarity,
                }
            )
            runtime = backend.runtime
            caught = await await_own_writes(
                runtime, caller, backend.written.of(caller), wait=backend.drains
            )
            found = await in_thread(
                recall,
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
                    min_similarity=body.min_similarity,
                ),
                now=backend.clock(),
            )
            return RecallResult(
                items=[_recalled(item) for item in found.items],
                model=runtime.embedder.model_id,
                caught_up=caught,
            )

        return await backend.run_async(ctx, call)

    @server.tool(
        name="list",
        title="List",
        description=described(LIST),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def list_memories(
        ctx: Context,
        type: _TypeFilter = None,
        scope: _ScopeFilter = None,
        project: _ProjectFilter = None,
        topic: _TopicFilter = None,
        include_archived: _IncludeArchived = False,
        limit: Annotated[int, Field(ge=1, le=200, description="How many per page.")] = 50,
        cursor: Annotated[
            Cursor | None, Field(description="The next_cursor of the page before.")
        ] = None,
    ) -> Annotated[CallToolResult, ListResult]:
        def call(caller: Caller) -> ListResult:
            after = None if cursor is None else decode_cursor(cursor)
            items, following = list_beliefs(
                backend.runtime.log,
                caller.tenant_id,
                MemoryFilter(type, scope, project, None, include_archived, topic),
                limit=limit,
                after=after,
                now=backend.clock(),
            )
            return ListResult(
                items=[_listed(item) for item in items],
                next_cursor=None if following is None else encode_cursor(following),
            )

        return backend.run(ctx, call)

    @server.tool(
        title="History",
        description=described(HISTORY),
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def history(
        ctx: Context,
        memory_id: MemoryId,
        as_of: Annotated[
            Rfc3339 | None, Field(description="What was believed at this time (RFC 3339).")
        ] = None,
        at_position: Annotated[
            int | None,
            Field(
                ge=0, le=MAX_POSITION, description="...or right after the write at this position."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, HistoryResult]:
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


def _listed(item: ListedBelief) -> ListedItem:
    current = item if isinstance(item, ListedCurrentBelief) else None
    return ListedItem(
        id=item.id,
        status=item.status,
        type=item.memory_type,
        scope=item.scope,
        project=item.project,
        topic=item.topic,
        content=None if current is None else current.content,
        belief=None if current is None else summarise(current.belief),
    )


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
        similarity=item.similarity,
        text_match=item.text_match,
        possibly_superseded_by=item.possibly_superseded_by,
        why=RankReason(
            mode=rank.mode,
            relevance=rank.relevance,
            fused=rank.fused,
            in_named_month=rank.in_named_month,
            similarity=rank.similarity,
            vector_rank=rank.vector_rank,
            text_rank=rank.text_rank,
            salience=rank.salience if current else None,
            pinned=rank.pinned,
            recency=rank.recency,
            decided_by=rank.decided_by,
        ),
    )
