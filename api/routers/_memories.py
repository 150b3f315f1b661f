"""``/v1/memories``: create memories, record versions and edges, read versions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from palimpsest.api._admission import OVER_CAP, Holder, HolderDep
from palimpsest.api._cursor import decode_cursor, encode_cursor
from palimpsest.api._deps import CallerDep, ClockDep, RuntimeDep, WriteDep, WriteRequest
from palimpsest.api._plain_requests import JsonAnswer, plain_route
from palimpsest.api._specs import (
    edge_spec,
    label_spec,
    memory_spec,
    requires,
    settle_spec,
    version_spec,
)
from palimpsest.api._waiting import await_drains
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.schemas import (
    BeliefPublic,
    CandidatesPublic,
    DecisionOutcome,
    EdgeCreate,
    EdgeCreated,
    ForgetCreate,
    LabelChange,
    MemoryCreate,
    MemoryCreated,
    MemoryHistoryPublic,
    MemoryPagePublic,
    MemoryVersionsPublic,
    VersionCreate,
    VersionCreated,
)
from palimpsest.api.schemas._common import MAX_POSITION, Cursor, Label, QueryFlag, Rfc3339
from palimpsest.api.schemas._memories import MAX_IDS, MemoryBatchPublic, SettleCreate, Settled
from palimpsest.domain.errors import ContentErasedError
from palimpsest.domain.memory import MemoryType
from palimpsest.projections.commands import memories
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.writer import (
    EdgeSpec,
    LabelSpec,
    MemorySpec,
    SettleSpec,
    VersionSpec,
)
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.aggregate_cache import aggregate_cache
from palimpsest.projections.views.access_stamps import scores_of, stamp_accesses
from palimpsest.projections.views.as_of import (
    belief_as_of,
    list_beliefs_as_of,
    position_at,
)
from palimpsest.projections.views.candidates import (
    PAIRED_TYPES,
    Candidates,
    never_paired,
    potential_contradictions,
)
from palimpsest.projections.views.current_beliefs import (
    BeliefAnswer,
    CurrentBelief,
    ErasedBelief,
    PendingBelief,
    current_belief,
    list_beliefs,
)
from palimpsest.projections.views.current_reads import read_current, read_current_ids
from palimpsest.projections.views.listing import MemoryFilter
from palimpsest.projections.views.reflections import list_reflections
from palimpsest.projections.views.timeline import MemoryHistory, memory_history
from palimpsest.projections.views.versions import MemoryVersions, memory_versions

__all__ = [
    "create_edge",
    "create_memory",
    "create_version",
    "forget_memory",
    "list_memories",
    "pin_memory",
    "read_candidates",
    "read_history",
    "read_memories",
    "read_memory",
    "read_versions",
    "restore_memory",
    "router",
    "settle_candidate",
    "unpin_memory",
]

router = APIRouter(prefix="/v1/memories", tags=["memories"])

_CandidatesWait = Annotated[
    Literal["wait"] | None,
    Query(
        description="`wait`: wait for the new version's contradiction candidates, up to"
        " `PALIMPSEST_CANDIDATE_WAIT_S` (by default the write answers `pending` at once"
        " unless they are ready within a few milliseconds)"
    ),
]


@plain_route(
    router,
    "POST",
    "",
    status_code=201,
    response_model=MemoryCreated,
    response_model_exclude_none=True,
    dependencies=[Depends(requires(MemorySpec))],
)
async def create_memory(
    body: MemoryCreate, write: WriteDep, holder: HolderDep, candidates: _CandidatesWait = None
) -> dict[str, Any]:
    """Create a memory with its first version. Each `evidence` excerpt is checked against
    the observation's content and recorded as a contribution by the caller.

    `potential_contradictions` lists current memories of the same type, scope and
    project (decision, preference and fact only) that the new one may contradict,
    newest first: those at least as similar as the conflict floor, its few nearest of
    its kind, and those recall will mark it possibly superseding. Advisory: nothing is
    labelled until the caller settles one. It is `pending`, with the URL
    of `GET /v1/memories/{id}/candidates`, when the version was not embedded within a
    few milliseconds (`PALIMPSEST_CANDIDATE_BUDGET_MS`): the candidates never hold up
    a write. `?candidates=wait` waits for them up to `PALIMPSEST_CANDIDATE_WAIT_S`.
    Settle one with `POST /v1/memories/{id}/candidates/{other_id}/settle`.

    `supersedes` names memories the new one replaces: a `supersedes` edge to each
    (an `add_edge` decision, as the edges API records it) in the same transaction
    as the memory."""
    spec = memory_spec(body)
    if body.type not in PAIRED_TYPES:
        result = await in_thread(_create, write, body, spec)
        never = never_paired(body.type, write.runtime.embedding.conflict_floor)
        return {**result, "potential_contradictions": never}
    budget_s = _budget(write, candidates == "wait")
    result, found = await in_thread(_create_and_look, write, body, spec, budget_s > 0)
    memory_id = UUID(str(result["id"]))
    return await _with_candidates(write, result, memory_id, found, holder, budget_s, candidates)


@plain_route(
    router,
    "POST",
    "/{memory_id}/versions",
    status_code=201,
    response_model=VersionCreated,
    response_model_exclude_none=True,
    dependencies=[Depends(requires(VersionSpec))],
)
async def create_version(
    memory_id: UUID,
    body: VersionCreate,
    write: WriteDep,
    holder: HolderDep,
    candidates: _CandidatesWait = None,
) -> dict[str, Any]:
    """Record a new version (a revision) of a memory, with its
    `potential_contradictions` as for a new memory (`?candidates=wait` likewise).

    A memory that is archived is not revised as it is: 409 `memory-forgotten` (it was
    forgotten) or `memory-superseded` (another memory supersedes it), each naming how
    to restore it. With `restore: true` the write restores it first (reverses the
    forget, retracts each `supersedes` edge to it, each a recorded decision) and
    records the version, in one transaction."""
    spec = version_spec(memory_id, body)
    budget_s = _budget(write, candidates == "wait")
    result, found = await in_thread(_revise_and_look, write, body, spec, budget_s > 0)
    return await _with_candidates(write, result, memory_id, found, holder, budget_s, candidates)


def _budget(write: WriteRequest, wait: bool) -> float:
    """Return how long this write may wait for its candidates: the whole
    ``PALIMPSEST_CANDIDATE_WAIT_S`` when asked to, else the short budget while it
    pays; nothing when no drain runs to embed the version."""
    if not write.drains:
        return 0.0
    return write.runtime.embedding.candidate_wait_s if wait else write.candidate_budget.take()


def _create(write: WriteRequest, body: MemoryCreate, spec: MemorySpec) -> dict[str, Any]:
    """Create the memory (:func:`memories.create_memory
    <palimpsest.projections.commands.memories.create_memory>`) and return the answer's
    body, its status and headers set, the drains woken."""
    outcome = memories.create_memory(
        write.writer, write.caller, spec, idempotency=write.idempotency(body)
    )
    return write.answer(outcome)


def _create_and_look(
    write: WriteRequest, body: MemoryCreate, spec: MemorySpec, look: bool
) -> tuple[dict[str, Any], Candidates]:
    """Create the memory (:func:`_create`), then take the first look for its
    candidates (:func:`_first_look`), on one worker thread (a hop to a thread and
    back costs a wait for the interpreter each way)."""
    result = _create(write, body, spec)
    memory_id, version_id = UUID(str(result["id"])), UUID(str(result["version_id"]))
    return result, _first_look(write, memory_id, version_id, look)


def _revise_and_look(
    write: WriteRequest, body: VersionCreate, spec: VersionSpec, look: bool
) -> tuple[dict[str, Any], Candidates]:
    """Record the version (:func:`memories.revise_memory
    <palimpsest.projections.commands.memories.revise_memory>`), then take the first
    look for its candidates, on one worker thread, as :func:`_create_and_look` does."""
    outcome = memories.revise_memory(
        write.writer, write.caller, spec, idempotency=write.idempotency(body)
    )
    result = write.answer(outcome)
    memory_id, version_id = UUID(str(result["memory_id"])), UUID(str(result["version_id"]))
    return result, _first_look(write, memory_id, version_id, look)


def _first_look(write: WriteRequest, memory_id: UUID, version_id: UUID, look: bool) -> Candidates:
    """Return the first look for the candidates of a version just written.

    Without ``look`` (the write will not wait), the version is not embedded yet: it
    answers pending without asking, or ready when this process knows the memory's
    type is never paired (from the aggregate it just wrote)."""
    if not look:
        written = aggregate_cache(write.runtime.log).peek(write.caller.tenant_id, memory_id)
        memory_type = getattr(written, "memory_type", None)
        if memory_type is not None and memory_type not in PAIRED_TYPES:
            return never_paired(memory_type, write.runtime.embedding.conflict_floor)
        if memory_type is not None:
            return Candidates(
                status="pending", floor=write.runtime.embedding.conflict_floor, items=[]
            )
    return _candidates_of(write, memory_id, version_id)


def _candidates_of(write: WriteRequest, memory_id: UUID, version_id: UUID) -> Candidates:
    runtime = write.runtime
    return potential_contradictions(
        runtime.log,
        write.caller.tenant_id,
        memory_id,
        version_id,
        runtime.embedding.conflict_floor,
        to_judge=True,
    )


async def _with_candidates(
    write: WriteRequest,
    result: dict[str, Any],
    memory_id: UUID,
    found: Candidates,
    holder: Holder,
    budget_s: float,
    candidates: Literal["wait"] | None,
) -> dict[str, Any]:
    """Add the new version's potential contradictions (``found`` by the first look),
    waiting up to ``budget_s`` for them to be ready; the wait holds no thread
    (:func:`palimpsest.api._waiting.await_drains`). A wait of the short budget (not asked for
    with ``?candidates=wait``) that did wait, its first look not ready, is counted
    toward whether the next ones pay."""
    version_id = UUID(str(result["version_id"]))
    waits = found.status != "ready" and budget_s > 0
    if waits:
        found = await await_drains(
            write.runtime,
            write.caller.tenant_id,
            lambda: _candidates_of(write, memory_id, version_id),
            lambda found: found.status == "ready",
            budget_s,
            holder,
            when_full="answer",  # the write committed: over the cap, answer pending at once
            first=found,
        )
    if waits and candidates != "wait":
        write.candidate_budget.settle(found.status == "ready")
    if found.status == "pending":
        found = CandidatesPublic(**dict(found), url=f"/v1/memories/{memory_id}/candidates")
    return {**result, "potential_contradictions": found}


@router.get(
    "/{memory_id}/candidates", response_model=CandidatesPublic, response_model_exclude_none=True
)
def read_candidates(
    memory_id: UUID, caller: CallerDep, runtime: RuntimeDep, clock: ClockDep
) -> Candidates:
    """Return the potential contradictions of the memory's current version: current
    memories of the same type, scope and project (decision, preference and fact only)
    at least as similar as the conflict floor, its few nearest of its kind, and those
    recall marks it possibly superseding; newest first, as `remember` answered them.
    Advisory: nothing is labelled or proposed from them. `pending` until the version
    is embedded."""
    belief = current_belief(runtime.log, caller.tenant_id, memory_id, now=clock)
    if isinstance(belief, ErasedBelief):
        erasure = belief.erasure.id
        msg = f"memory {memory_id} was erased by decision {erasure}"
        raise ContentErasedError(msg, erasure)
    if not isinstance(belief, CurrentBelief):
        return Candidates(status="pending", floor=runtime.embedding.conflict_floor, items=[])
    version_id = UUID(str(belief.belief["current_version_id"]))
    return potential_contradictions(
        runtime.log,
        caller.tenant_id,
        memory_id,
        version_id,
        runtime.embedding.conflict_floor,
        to_judge=True,
    )


@router.post(
    "/{memory_id}/candidates/{other_id}/settle",
    status_code=201,
    response_model=Settled,
    responses={200: {"model": Settled, "description": "Replayed: nothing was recorded."}},
    dependencies=[Depends(requires(SettleSpec))],
)
def settle_candidate(
    memory_id: UUID, other_id: UUID, body: SettleCreate, write: WriteDep
) -> dict[str, Any]:
    """Settle a potential conflict between this memory and `other_id` (one of its
    `potential_contradictions`), as the caller judged it, with its reason:
    `supersedes` records a `supersedes` edge from this memory to the other (as
    `POST /v1/memories/{id}/edges` does: the other is archived structurally);
    `both_stand` records a `dismiss_conflict` decision, and recall stops marking the
    pair. The same settlement again answers 200 with the original (`replayed`).

    409 `memory-forgotten` or `memory-superseded` when either memory is no longer
    current (recall again), `already-settled` when the pair was settled the other
    way; 410 `content-erased` when either was erased."""
    return write.perform(body, settle_spec(memory_id, other_id, body))


@router.post(
    "/{memory_id}/edges",
    status_code=201,
    response_model=EdgeCreated,
    responses={200: {"model": EdgeCreated, "description": "Replayed: the edge existed."}},
    dependencies=[Depends(requires(EdgeSpec))],
)
def create_edge(memory_id: UUID, body: EdgeCreate, write: WriteDep) -> dict[str, Any]:
    """Add an edge from this memory to another: `supersedes` (this one is newer),
    `conflicts_with`, `extends` or `derived_from`. Event memories accept only `extends`."""
    return write.perform(body, edge_spec(memory_id, body))


@router.get("", response_model=MemoryPagePublic)
def list_memories(
    caller: CallerDep,
    runtime: RuntimeDep,
    clock: ClockDep,
    type: MemoryType | None = None,
    scope: Annotated[Label | None, Query()] = None,
    project: Annotated[Label | None, Query()] = None,
    topic: Annotated[Label | None, Query()] = None,
    status: Literal["current", "pending"] | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[Cursor | None, Query()] = None,
    at_position: Annotated[
        int | None, Query(ge=0, le=MAX_POSITION, description="Log position to list at")
    ] = None,
    as_of: Annotated[Rfc3339 | None, Query(description="RFC 3339 time to list at")] = None,
    include_archived: Annotated[
        QueryFlag, Query(description="Also list forgotten memories (flagged in their labels)")
    ] = False,
    include_content: Annotated[
        QueryFlag, Query(description="Each current memory's text (false leaves it out)")
    ] = True,
    include_reflections: Annotated[
        QueryFlag,
        Query(
            description="Also answer the reflections of the scope and project (not with "
            "at_position or as_of: reflections have no as-of read)"
        ),
    ] = False,
) -> MemoryPagePublic:
    """List memories, newest first, with filters. Each is `current` with its belief, its
    type, scope, project and topic, and its current version's `content` (unless
    `include_content=false`), or `pending` without belief or content (never stale
    content). Pass `next_cursor` back as `cursor` for the next page. Forgotten memories
    are left out unless `include_archived=true`, which lists them flagged
    (labels.archived: reason and decision). A listing's `salience` is the score in [0, 1];
    listing is not an access. To read memories by id, see `GET /v1/memories/batch`.

    With `at_position` or `as_of`, lists what was believed then: the memories that
    existed, each `as_of` with its belief computed from the log up to that position
    (reported as `position`; pass the same position with each page's cursor). Given
    both, the earlier of the two positions is used. An as-of listing is never pending:
    `status=pending` lists nothing, `status=current` everything."""
    after = decode_cursor(cursor) if cursor else None
    position = _as_of_position(runtime, caller, at_position, as_of)
    if position is not None:
        if status == "pending":  # what was believed then is settled: nothing is pending
            return MemoryPagePublic(items=[], position=position)
        used, as_of_items, after = list_beliefs_as_of(
            runtime.log,
            caller.tenant_id,
            position,
            memory_type=type,
            scope=scope,
            project=project,
            topic=topic,
            limit=limit,
            after=after,
            include_archived=include_archived,
        )
        return MemoryPagePublic(
            items=as_of_items, next_cursor=encode_cursor(after) if after else None, position=used
        )
    now = clock()
    items, after = list_beliefs(
        runtime.log,
        caller.tenant_id,
        MemoryFilter(type, scope, project, status, include_archived, topic),
        limit=limit,
        after=after,
        now=now,
        include_content=include_content,
    )
    items = _with_scores(runtime, caller, items, [i.id for i in items], now, stamp=False)
    reflections = (
        list_reflections(runtime.log, caller.tenant_id, scope=scope, project=project)
        if include_reflections
        else None
    )
    return MemoryPagePublic(
        items=items, next_cursor=encode_cursor(after) if after else None, reflections=reflections
    )


_BATCH = JsonAnswer(MemoryBatchPublic)
"""The batch read's answers, serialised on the worker thread that read them."""


@plain_route(router, "GET", "/batch", query=True, answers=_BATCH)
async def read_memories(
    caller: CallerDep,
    runtime: RuntimeDep,
    clock: ClockDep,
    ids: Annotated[
        list[UUID],
        Query(
            min_length=1,
            max_length=MAX_IDS,
            description=f"The memories to read (repeat the parameter, at most {MAX_IDS}).",
        ),
    ],
    include_content: Annotated[
        QueryFlag, Query(description="Each current memory's text (false leaves it out)")
    ] = True,
) -> Response:
    """Read up to 100 memories by id in one call: each as `GET /v1/memories/{id}` answers
    it (archived ones flagged, erased ones as placeholders), in the order given (each
    once), and the ids that name no memory of the tenant in `not_found`. Each current
    one counts as an access, as a read by id does. It never waits for revision."""
    body = await in_thread(_read_by_ids, runtime, caller, ids, clock(), include_content)
    return _BATCH.response(body)


def _read_by_ids(
    runtime: Runtime, caller: Caller, ids: list[UUID], now: datetime, include_content: bool
) -> bytes:
    """Return the answer (JSON) of the memories of ``ids`` in the order given (each
    once), and the ids not found; the current ones count as accessed."""
    wanted = list(dict.fromkeys(ids))
    # One statement: the beliefs, their texts and their salience (with the accesses
    # this process has not written yet); this read's own accesses are buffered.
    scored = read_current_ids(runtime.log, caller.tenant_id, wanted, now, content=include_content)
    stamp_accesses(
        runtime.log, caller.tenant_id, [i.id for i in scored if isinstance(i, CurrentBelief)], now
    )
    found = {i.id: i for i in scored}
    return _BATCH.dump(
        MemoryBatchPublic(
            items=[found[i] for i in wanted if i in found],
            not_found=[i for i in wanted if i not in found],
        )
    )


def _as_of_position(
    runtime: Runtime, caller: Caller, at_position: int | None, as_of: datetime | None
) -> int | None:
    """Return the log position an as-of read asks for (None for a current read): the
    earlier of the two when both are given (what was believed at both bounds)."""
    if as_of is None:
        return at_position
    by_time = position_at(runtime.log, caller.tenant_id, as_of)
    return by_time if at_position is None else min(at_position, by_time)


@router.get("/{memory_id}/history", response_model=MemoryHistoryPublic)
def read_history(memory_id: UUID, caller: CallerDep, runtime: RuntimeDep) -> MemoryHistory:
    """Return a memory's whole record: every version with its content, the excerpts it
    was formed from and its contributions (active or deactivated, and by which
    decision), its edges in both directions, and every event that touched it, with log
    position, recorded time and principal."""
    return memory_history(runtime.log, caller.tenant_id, memory_id)


_BELIEF = JsonAnswer(BeliefPublic)
"""A read by id's answers, serialised on the worker thread that read them."""

_PENDING = ((b"retry-after", b"1"),)
"""The header of a ``pending`` answer."""


@plain_route(router, "GET", "/{memory_id}", answers=_BELIEF, responses=OVER_CAP)
async def read_memory(
    memory_id: UUID,
    caller: CallerDep,
    holder: HolderDep,
    runtime: RuntimeDep,
    clock: ClockDep,
    wait: Annotated[float, Query(ge=0, le=30, description="Seconds to wait for revision")] = 0,
    at_position: Annotated[
        int | None, Query(ge=0, le=MAX_POSITION, description="Log position to read at")
    ] = None,
    as_of: Annotated[Rfc3339 | None, Query(description="RFC 3339 time to read at")] = None,
) -> Response:
    """Return what palimpsest currently believes about a memory. The answer is `current`
    (with the belief) only when every accepted write that could change it has been
    projected; otherwise it is `pending`, with the requested and published revisions,
    no belief, and `Retry-After`. `wait` (seconds, at most 30) waits for revision first.
    A memory the drain cannot project is `unprojectable`, with the error, at once: it
    stays so until a later write to it (or `palimpsest rebuild`).

    With `at_position` or `as_of`, the answer is what was believed then (`as_of`, with
    the log position used; a time resolves to the last position recorded by then), computed
    by the same projection function from the log up to that position; given both, the
    earlier of the two positions). It is never pending."""
    if at_position is not None or as_of is not None:
        body = await in_thread(_read_as_of, runtime, caller, memory_id, at_position, as_of)
        return _BELIEF.response(body)

    def check() -> tuple[BeliefAnswer, bytes]:
        at = clock()
        # One round trip; this read's access is buffered, written later in a batch
        # (views/access_buffer.py), never in a transaction of the read's own.
        answer = read_current(runtime.log, caller.tenant_id, memory_id, at)
        if isinstance(answer, CurrentBelief):
            stamp_accesses(runtime.log, caller.tenant_id, [memory_id], at)
        return answer, _BELIEF.dump(answer)

    answer, body = await await_drains(
        runtime,
        caller.tenant_id,
        check,
        lambda checked: not isinstance(checked[0], PendingBelief),
        wait,
        holder,  # a wait beyond the caps answers 429
    )
    return _BELIEF.response(body, _PENDING if isinstance(answer, PendingBelief) else ())


def _read_as_of(
    runtime: Runtime,
    caller: Caller,
    memory_id: UUID,
    at_position: int | None,
    as_of: datetime | None,
) -> bytes:
    position = _as_of_position(runtime, caller, at_position, as_of)
    assert position is not None  # one of the two is given
    return _BELIEF.dump(belief_as_of(runtime.log, caller.tenant_id, memory_id, position))


_Item = TypeVar("_Item")


def _with_scores(
    runtime: Runtime,
    caller: Caller,
    answers: list[_Item],
    ids: list[UUID],
    now: datetime,
    *,
    stamp: bool,
) -> list[_Item]:
    """Return the answers (of the memories ``ids``) with each current one's salience
    score (from accesses so far), and, when ``stamp``, count this read as one more
    access of each current one (reads by id; never listings, never the polls of a
    wait). Tuning state only: never an event or a label."""
    beliefs = {
        i: a.belief for i, a in zip(ids, answers, strict=True) if isinstance(a, CurrentBelief)
    }
    scores = scores_of(runtime.log, caller.tenant_id, beliefs, now)
    if stamp:
        stamp_accesses(runtime.log, caller.tenant_id, list(beliefs), now)
    return [
        a.model_copy(update={"salience": scores.get(i)}) if isinstance(a, CurrentBelief) else a
        for i, a in zip(ids, answers, strict=True)
    ]


@router.get("/{memory_id}/versions", response_model=MemoryVersionsPublic)
def read_versions(memory_id: UUID, caller: CallerDep, runtime: RuntimeDep) -> MemoryVersions:
    """List a memory's versions, oldest first, with their content and cited evidence.
    This is the record, not the current belief."""
    return memory_versions(runtime.log, caller.tenant_id, memory_id)


_DECISION_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": DecisionOutcome, "description": "Replayed: nothing was recorded."}
}


@router.post(
    "/{memory_id}/forget",
    status_code=201,
    response_model=DecisionOutcome,
    responses=_DECISION_RESPONSES,
    dependencies=[Depends(requires(LabelSpec))],
)
def forget_memory(memory_id: UUID, body: ForgetCreate, write: WriteDep) -> dict[str, Any]:
    """Forget a memory: archive it reversibly, by a recorded decision with a required
    `reason`. It leaves ordinary reads and lists; an as-of read before the forget still
    sees it. Forgetting is not evidence that it is false."""
    return write.perform(body, label_spec(memory_id, "forget", body))


@router.post(
    "/{memory_id}/restore",
    status_code=201,
    response_model=DecisionOutcome,
    responses=_DECISION_RESPONSES,
    dependencies=[Depends(requires(LabelSpec))],
)
def restore_memory(
    memory_id: UUID, write: WriteDep, body: LabelChange | None = None
) -> dict[str, Any]:
    """Reverse a forget. A memory that is not forgotten answers 409, including one
    archived structurally (superseded), which `restore` does not reverse."""
    body = body or LabelChange()
    return write.perform(body, label_spec(memory_id, "restore", body))


@router.post(
    "/{memory_id}/pin",
    status_code=201,
    response_model=DecisionOutcome,
    responses=_DECISION_RESPONSES,
    dependencies=[Depends(requires(LabelSpec))],
)
def pin_memory(memory_id: UUID, write: WriteDep, body: LabelChange | None = None) -> dict[str, Any]:
    """Pin a memory, by a recorded decision."""
    body = body or LabelChange()
    return write.perform(body, label_spec(memory_id, "pin", body))


@router.post(
    "/{memory_id}/unpin",
    status_code=201,
    response_model=DecisionOutcome,
    responses=_DECISION_RESPONSES,
    dependencies=[Depends(requires(LabelSpec))],
)
def unpin_memory(
    memory_id: UUID, write: WriteDep, body: LabelChange | None = None
) -> dict[str, Any]:
    """Remove a pin, by a recorded decision."""
    body = body or LabelChange()
    return write.perform(body, label_spec(memory_id, "unpin", body))
