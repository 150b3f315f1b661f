"""The administrative tools, advertised only when ``PALIMPSEST_MCP_ADMIN_TOOLS`` is on:
pin, unpin, restore, erase, set_retention, list_proposals and decide_proposal.

Each checks its role where the HTTP route does (the writer refuses a spec the
caller's role cannot make, e.g. an erasure without an admin token).
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from palimpsest.api._cursor import decode_cursor, encode_cursor
from palimpsest.api._specs import erase_spec, label_spec, retention_spec
from palimpsest.api.mcp._arguments import (
    MemoryId,
    RequestId,
    arguments,
    decision_result,
    described,
)
from palimpsest.api.mcp._backend import Backend
from palimpsest.api.mcp._models import (
    DecisionResult,
    ErasureResult,
    ProposalItem,
    ProposalList,
    RetentionResult,
)
from palimpsest.api.schemas import (
    ErasureCreate,
    LabelChange,
    ProposalApply,
    ProposalReject,
    RetentionUpdate,
)
from palimpsest.api.schemas._common import Cursor, Reason
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.decisions import LabelOp
from palimpsest.projections.commands.proposals import ProposalDecisionSpec
from palimpsest.projections.views.proposals import ProposalFilter, list_proposals
from palimpsest.projections.views.receipts import erasure_receipt

__all__ = ["add_admin_tools"]

OptionalReason = Annotated[Reason | None, Field(description="Why; recorded with the decision.")]


def add_admin_tools(server: MCPServer, backend: Backend) -> None:
    """Register the administrative tools on ``server``."""
    labels = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)

    def label(
        ctx: Context, memory_id: UUID, op: LabelOp, reason: str | None, request_id: str | None
    ) -> CallToolResult:
        def call(caller: Caller) -> DecisionResult:
            body = LabelChange.model_validate({"reason": reason})
            given = arguments(memory_id=memory_id, reason=reason)
            written = backend.write(
                caller,
                [label_spec(memory_id, op, body)],
                request=backend.request(op, request_id, given),
            )
            return decision_result(backend, caller, written.results[0], memory_id)

        return backend.run(ctx, call)

    @server.tool(title="Pin", annotations=labels)
    def pin(
        ctx: Context,
        memory_id: MemoryId,
        reason: OptionalReason = None,
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, DecisionResult]:
        """Pin a memory: it ranks above unpinned ones and is never proposed for forgetting."""
        return label(ctx, memory_id, "pin", reason, request_id)

    @server.tool(title="Unpin", annotations=labels)
    def unpin(
        ctx: Context,
        memory_id: MemoryId,
        reason: OptionalReason = None,
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, DecisionResult]:
        """Remove a memory's pin."""
        return label(ctx, memory_id, "unpin", reason, request_id)

    @server.tool(title="Restore", annotations=labels)
    def restore(
        ctx: Context,
        memory_id: MemoryId,
        reason: OptionalReason = None,
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, DecisionResult]:
        """Reverse a forget (a superseded memory comes back with revise and restore: true)."""
        return label(ctx, memory_id, "restore", reason, request_id)

    @server.tool(
        title="Erase",
        description=described(
            """
            Erase memories and observations for good (admin token): their content and
            everything formed only from it. Not undoable; prefer forget.
            """
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True
        ),
    )
    def erase(
        ctx: Context,
        reason: Annotated[Reason, Field(description="Why; recorded with the erasure.")],
        memory_ids: Annotated[list[UUID], Field(max_length=1000)] = [],  # noqa: B006
        observation_ids: Annotated[list[UUID], Field(max_length=1000)] = [],  # noqa: B006
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, ErasureResult]:
        def call(caller: Caller) -> ErasureResult:
            body = ErasureCreate.model_validate(
                {"memory_ids": memory_ids, "observation_ids": observation_ids, "reason": reason}
            )
            given = arguments(
                reason=reason,
                memory_ids=[str(i) for i in memory_ids],
                observation_ids=[str(i) for i in observation_ids],
            )
            written = backend.write(
                caller, [erase_spec(body)], request=backend.request("erase", request_id, given)
            )
            result = written.results[0]
            erased = set(body.memory_ids) | {
                UUID(op["memory_id"]) for op in result.get("accepted", []) if "memory_id" in op
            }
            backend.runtime.version_cache.evict(caller.tenant_id, erased)
            receipt = erasure_receipt(backend.runtime.log, caller.tenant_id, UUID(result["id"]))
            return ErasureResult(
                erasure_id=receipt.id,
                status=receipt.status,
                position=result["position"],
                removed_observations=receipt.removed.observations,
                removed_memories=receipt.removed.memories,
                removed_versions=receipt.removed.versions,
                recomputed=receipt.recomputed,
            )

        return backend.run(ctx, call)

    @server.tool(
        title="Set retention",
        description=described(
            """
            Set how long new observations keep their bytes (admin token; within the
            deployment's maxima). A shortening also moves deadlines not yet passed.
            """
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True
        ),
    )
    def set_retention(
        ctx: Context,
        raw_hours: Annotated[int | None, Field(ge=1, description="Raw captures.")] = None,
        transient_hours: Annotated[int | None, Field(ge=1, description="Transient.")] = None,
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, RetentionResult]:
        def call(caller: Caller) -> RetentionResult:
            body = RetentionUpdate.model_validate(
                {"raw_hours": raw_hours, "transient_hours": transient_hours}
            )
            given = arguments(raw_hours=raw_hours, transient_hours=transient_hours)
            written = backend.write(
                caller,
                [retention_spec(body)],
                request=backend.request("set_retention", request_id, given),
            )
            return RetentionResult.model_validate(written.results[0])

        return backend.run(ctx, call)

    @server.tool(
        name="list_proposals",
        title="List proposals",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def list_forgetting_proposals(
        ctx: Context,
        status: Literal["proposed", "applied", "rejected", "dismissed"] = "proposed",
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        cursor: Annotated[Cursor | None, Field(description="next_cursor of a page.")] = None,
    ) -> Annotated[CallToolResult, ProposalList]:
        """List the forgetting pass's proposals, newest first (open ones by default)."""

        def call(caller: Caller) -> ProposalList:
            after = None if cursor is None else decode_cursor(cursor)
            items, following = list_proposals(
                backend.runtime.log,
                caller.tenant_id,
                ProposalFilter(status=status),
                limit=limit,
                after=after,
            )
            return ProposalList(
                items=[
                    ProposalItem(
                        id=p.id,
                        status=p.status,
                        action=p.action,
                        probability=p.probability,
                        memory_id=p.memory.id,
                        memory_content=p.memory.content,
                        related_memory_id=None if p.related is None else p.related.id,
                        related_content=None if p.related is None else p.related.content,
                        changed=p.changed,
                    )
                    for p in items
                ],
                next_cursor=None if following is None else encode_cursor(following),
            )

        return backend.run(ctx, call)

    @server.tool(
        title="Decide a proposal",
        description=described(
            """
            Apply a forgetting proposal (archive, supersede or record a conflict) or
            reject it (a reason is required to reject).
            """
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def decide_proposal(
        ctx: Context,
        proposal_id: UUID,
        verdict: Literal["apply", "reject"],
        reason: OptionalReason = None,
        request_id: RequestId = None,
    ) -> Annotated[CallToolResult, DecisionResult]:
        def call(caller: Caller) -> DecisionResult:
            if verdict == "apply":
                applied = ProposalApply.model_validate({"reason": reason})
                spec = ProposalDecisionSpec(proposal_id, "apply", applied.reason)
            else:
                rejected = ProposalReject.model_validate({"reason": reason})
                spec = ProposalDecisionSpec(proposal_id, "reject", rejected.reason)
            given = arguments(proposal_id=proposal_id, verdict=verdict, reason=reason)
            written = backend.write(
                caller, [spec], request=backend.request("decide_proposal", request_id, given)
            )
            return decision_result(backend, caller, written.results[0], None)

        return backend.run(ctx, call)
