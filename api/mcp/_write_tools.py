"""The write tools: remember, revise, settle and forget.

Each takes an optional ``request_id`` (the HTTP API's ``Idempotency-Key``), so an
agent's retry of a call whose answer it lost never writes twice.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from palimpsest.api._specs import (
    label_spec,
    memory_spec,
    observation_spec,
    settle_spec,
    version_spec,
)
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.mcp._arguments import (
    MemoryId,
    ModelId,
    RequestId,
    arguments,
    decision_result,
    described,
)
from palimpsest.api.mcp._backend import Backend, Written
from palimpsest.api.mcp._conflicts import (
    await_conflicts,
    conflicts_status,
    describe_conflicts,
    next_step,
)
from palimpsest.api.mcp._models import DecisionResult, RememberResult, ReviseResult, SettleResult
from palimpsest.api.schemas import ForgetCreate, MemoryCreate, ObservationCreate, VersionCreate
from palimpsest.api.schemas._common import Label, Reason
from palimpsest.api.schemas._memories import MAX_SUPERSEDES, SettleCreate
from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.memory import MemoryType
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.writer import WriteSpec

__all__ = ["add_write_tools"]

Content = Annotated[
    str,
    Field(
        min_length=1, description="The memory's text: one claim, in a sentence that stands alone."
    ),
]
SourceText = Annotated[
    str | None,
    Field(
        min_length=1,
        description="The text the memory comes from (the user's message, a document); kept, "
        "and cited as the memory's evidence.",
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
Source = Annotated[Label | None, Field(description="Where source_text came from.")]

REMEMBER = """
    Store a new memory: one claim worth keeping beyond this conversation (a fact, a
    preference, a decision...). Use it for something not stored yet. When the user
    corrects or updates a memory you already have the id of (from recall or list),
    use revise instead; recall first when unsure whether it is stored.

    The answer has the new memory's id and potential_conflicts: stored memories of the
    same type and scope close enough in meaning that they may say something else about
    the same thing (each with its id, text and similarity). Read them and settle each
    one: settle with resolution "supersedes" if the new memory replaces it, "both_stand"
    if both hold. When you already know which memories the new one replaces, name them
    in supersedes and they are settled in the same call.
"""

REVISE = """
    Record a new version of a memory you have the id of (from recall, list or
    remember), when the user corrects or updates that claim ("standup moved to 9:30").
    The old text stays in its history. For a new, separate claim use remember.

    A memory that was forgotten or that another memory supersedes is refused, and the
    problem says which and why: revise the newer memory instead, or pass restore: true
    to bring this one back and revise it in one call.
"""

SETTLE = """
    Settle a potential conflict that remember reported: decide, from the two texts,
    whether one memory replaces the other. memory_id is the one you keep (the new one),
    other_id the one it may conflict with.

    resolution "supersedes": memory_id replaces other_id, which is archived and no
    longer recalled. "both_stand": both hold (different times of day, different
    contexts, two things liked); both stay, and the pair is no longer flagged. Say why
    in reason. Refused when either memory changed since (forgotten, superseded by
    another, erased) or the pair was settled the other way; recall again then.
"""

FORGET = """
    Forget a memory that no longer holds, when the user asks you to or it is plainly
    obsolete, with the reason. Reversible (an administrator can restore it), and
    history still shows it. When a newer memory replaces it, settle with "supersedes"
    instead (or name it in remember's supersedes): that says what replaced it.
"""


def add_write_tools(server: MCPServer, backend: Backend) -> None:
    """Register remember, revise, settle and forget on ``server``."""
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)

    @server.tool(title="Remember", description=described(REMEMBER), annotations=writes)
    async def remember(
        ctx: Context,
        content: Content,
        type: Annotated[
            MemoryType,
            Field(
                description="What kind of claim: fact, preference (what someone likes or "
                "wants), decision, blocker, event (something that happened) or note."
            ),
        ],
        scope: Annotated[
            Label,
            Field(
                description="Whom or what it is about: a person (user, ana), a team, a "
                "system. Use the same scope for the same subject: conflicts are looked for "
                "within one type and scope."
            ),
        ],
        project: Annotated[Label | None, Field(description="A project it belongs to.")] = None,
        topic: Annotated[Label | None, Field(description="A topic to file it under.")] = None,
        source_text: SourceText = None,
        excerpt: Excerpt = None,
        source: Source = None,
        model_id: ModelId = None,
        supersedes: Annotated[
            list[UUID],
            Field(
                max_length=MAX_SUPERSEDES,
                description="Ids of stored memories this one replaces (from recall): each "
                "is settled as superseded in the same call.",
            ),
        ] = [],  # noqa: B006
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, RememberResult]:
        async def call(caller: Caller) -> RememberResult:
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
                    "supersedes": supersedes,
                }
            )
            given = arguments(
                content=content,
                type=type,
                scope=scope,
                project=project,
                topic=topic,
                source_text=source_text,
                excerpt=excerpt,
                source=source,
                model_id=model_id,
                supersedes=[str(i) for i in supersedes],
            )
            written = await in_thread(
                backend.write,
                caller,
                [*specs, memory_spec(body, len(specs))],
                request=backend.request("remember", request_id, given),
            )
            created = written.results[-1]
            memory_id = UUID(str(created["id"]))
            version_id = UUID(str(created["version_id"]))
            found = await await_conflicts(backend, caller, memory_id, version_id)
            conflicts = await in_thread(describe_conflicts, backend, caller, found)
            status = await in_thread(backend.status, caller, memory_id)
            checked = conflicts_status(found)
            return RememberResult(
                memory_id=memory_id,
                version_id=version_id,
                position=created["position"],
                status=status,
                replayed=written.replayed,
                superseded=[UUID(str(s["target_id"])) for s in created.get("supersedes", [])],
                conflicts_status=checked,
                potential_conflicts=conflicts,
                next_step=next_step(memory_id, checked, conflicts),
                **_observation_fields(written),
            )

        return await backend.run_async(ctx, call)

    @server.tool(title="Revise", description=described(REVISE), annotations=writes)
    def revise(
        ctx: Context,
        memory_id: MemoryId,
        content: Content,
        source_text: SourceText = None,
        excerpt: Excerpt = None,
        source: Source = None,
        model_id: ModelId = None,
        restore: Annotated[
            bool,
            Field(
                description="Bring the memory back first if it was forgotten or superseded "
                "(the superseding edge is retracted), in the same call."
            ),
        ] = False,
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, ReviseResult]:
        def call(caller: Caller) -> ReviseResult:
            specs, evidence = _cited(source_text, excerpt, source)
            body = VersionCreate.model_validate(
                {
                    "content": content,
                    "evidence": evidence,
                    "model_id": model_id,
                    "restore": restore,
                }
            )
            given = arguments(
                memory_id=memory_id,
                content=content,
                source_text=source_text,
                excerpt=excerpt,
                source=source,
                model_id=model_id,
                restore=restore,
            )
            written = backend.write(
                caller,
                [*specs, version_spec(memory_id, body, len(specs))],
                request=backend.request("revise", request_id, given),
            )
            created = written.results[-1]
            return ReviseResult(
                memory_id=memory_id,
                version_id=UUID(str(created["version_id"])),
                position=created["position"],
                status=backend.status(caller, memory_id),
                replayed=written.replayed,
                **_observation_fields(written),
            )

        return backend.run(ctx, call)

    @server.tool(title="Settle a conflict", description=described(SETTLE), annotations=writes)
    def settle(
        ctx: Context,
        memory_id: Annotated[
            UUID, Field(description="The memory you keep: the new one, from remember.")
        ],
        other_id: Annotated[
            UUID, Field(description="The memory it may conflict with (a potential conflict).")
        ],
        resolution: Annotated[
            Literal["supersedes", "both_stand"],
            Field(description="supersedes: memory_id replaces other_id. both_stand: both hold."),
        ],
        reason: Annotated[
            Reason, Field(description="Why, in words: what the user said, or what you saw.")
        ],
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, SettleResult]:
        def call(caller: Caller) -> SettleResult:
            body = SettleCreate.model_validate({"resolution": resolution, "reason": reason})
            given = arguments(
                memory_id=memory_id, other_id=other_id, resolution=resolution, reason=reason
            )
            written = backend.write(
                caller,
                [settle_spec(memory_id, other_id, body)],
                request=backend.request("settle", request_id, given),
            )
            return SettleResult.model_validate(written.results[0])

        return backend.run(ctx, call)

    @server.tool(
        title="Forget",
        description=described(FORGET),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True
        ),
    )
    def forget(
        ctx: Context,
        memory_id: MemoryId,
        reason: Annotated[Reason, Field(description="Why it should be forgotten.")],
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, DecisionResult]:
        def call(caller: Caller) -> DecisionResult:
            body = ForgetCreate.model_validate({"reason": reason})
            written = backend.write(
                caller,
                [label_spec(memory_id, "forget", body)],
                request=backend.request(
                    "forget", request_id, arguments(memory_id=memory_id, reason=reason)
                ),
            )
            return decision_result(backend, caller, written.results[0], memory_id)

        return backend.run(ctx, call)


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


def _observation_fields(written: Written) -> dict[str, Any]:
    """Return the observation's id and position when the write captured one first."""
    if len(written.results) < 2:
        return {}
    captured = written.results[0]
    return {
        "observation_id": UUID(str(captured["id"])),
        "observation_position": captured["position"],
    }
