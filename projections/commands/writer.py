"""The write path: validate, build events on aggregates, then save once.

A request (one write, or a batch of up to 1,000) is one unit of work: every
aggregate it touches is loaded from the log, every decision is taken on those
aggregates (never on a read model), and one ``save()`` records all events,
their payload rows and the idempotency record in one transaction. A request
that fails validation raises before anything is saved, so it writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError

from domain.errors import EdgeExistsError, InvalidInputError, NotFoundError, PermissionDeniedError
from domain.evidence import Excerpt, cut_excerpt
from domain.limits import MAX_OBSERVATION_BYTES, MAX_VERSION_BYTES, encode_content
from domain.memory import Memory
from domain.observation import Observation
from domain.retention import retention_deadline
from domain.role import can_write
from domain.tenant import Tenant
from projections.commands.caller import Caller
from projections.commands.decisions import (
    LabelSpec,
    Operations,
    RetractSpec,
    WithdrawSpec,
    decide_label,
    decide_retract,
    decide_withdraw,
    record_decision,
    seen_version,
)
from projections.commands.erasure import EraseSpec, decide_erase
from projections.commands.idempotency import find_response
from projections.commands.tenant_deletion import decide_tenant_deletion
from projections.commands.unit_of_work import Item, UnitOfWork
from projections.store.errors import ConcurrentWriteError, DatabaseUnavailableError
from projections.store.eventlog import EventLog, IdempotencyRecord, Positions
from projections.store.tenancy import tenant_scope, tenant_transaction

__all__ = [
    "CapturePolicy",
    "EdgeSpec",
    "EraseSpec",
    "EvidenceSpec",
    "LabelSpec",
    "MemorySpec",
    "ObservationSpec",
    "Ref",
    "RetentionSpec",
    "RetractSpec",
    "TenantDeletionSpec",
    "VersionSpec",
    "WithdrawSpec",
    "WriteOutcome",
    "WriteSpec",
    "Writer",
]

_log = logging.getLogger(__name__)
_MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class Ref:
    """A reference, inside a batch, to the id produced by an earlier item."""

    index: int


Id = UUID | Ref


@dataclass(frozen=True)
class EvidenceSpec:
    """An excerpt ``[start, end)`` (code points) of an observation, cited as support."""

    observation_id: Id
    start: int
    end: int


@dataclass(frozen=True)
class ObservationSpec:
    """Capture an observation."""

    content: str
    media_type: str
    source: str | None
    captured_at: datetime | None
    transient: bool


@dataclass(frozen=True)
class MemorySpec:
    """Create a memory with its first version."""

    memory_type: str
    scope: str
    project: str | None
    topic: str | None
    content: str
    evidence: tuple[EvidenceSpec, ...]
    model_id: str | None
    trust: float


@dataclass(frozen=True)
class VersionSpec:
    """Record a new version of an existing memory."""

    memory_id: Id
    content: str
    evidence: tuple[EvidenceSpec, ...]
    model_id: str | None
    trust: float


@dataclass(frozen=True)
class EdgeSpec:
    """Add an edge from one memory to another."""

    memory_id: Id
    kind: str
    target_id: Id


@dataclass(frozen=True)
class RetentionSpec:
    """Set the tenant's retention of observation bytes, in hours (None keeps the
    current value)."""

    raw_hours: int | None
    transient_hours: int | None


@dataclass(frozen=True)
class TenantDeletionSpec:
    """Close the caller's tenant and have the erasure drain erase all of it."""

    reason: str


WriteSpec = (
    ObservationSpec
    | MemorySpec
    | VersionSpec
    | EdgeSpec
    | RetractSpec
    | WithdrawSpec
    | LabelSpec
    | RetentionSpec
    | EraseSpec
    | TenantDeletionSpec
)


@dataclass(frozen=True)
class CapturePolicy:
    """Deployment values the write path needs (from ``ApiSettings``)."""

    raw_retention: timedelta
    transient_retention: timedelta
    clock_skew: timedelta = timedelta(minutes=5)


@dataclass(frozen=True)
class WriteOutcome:
    """The response of a write, and whether it replays an earlier identical request."""

    status_code: int
    body: dict[str, Any]
    replayed: bool


class Writer:
    """Applies write requests for authenticated callers."""

    def __init__(self, log: EventLog, policy: CapturePolicy, clock: Callable[[], datetime]) -> None:
        self.log = log
        self.policy = policy
        self.clock = clock

    def write(
        self,
        caller: Caller,
        specs: Sequence[WriteSpec],
        *,
        batch: bool,
        idempotency: tuple[str, str] | None = None,
    ) -> WriteOutcome:
        """Apply ``specs`` all-or-nothing and return the response.

        ``idempotency`` is ``(key, request_digest)``: a key seen before with
        the same digest returns the original response and writes nothing.

        Raises:
            PermissionDeniedError: the caller's role cannot write.
            IdempotencyKeyReusedError: the key was used for a different request.
            InvalidInputError, NotFoundError, ConflictError: a spec is refused.
            ConcurrentWriteError: other writers kept winning the same aggregates.
        """
        if not can_write(caller.role):
            msg = f"role {caller.role!r} cannot write; a writer or admin token is required"
            raise PermissionDeniedError(msg)
        with tenant_scope(caller.tenant_id):
            replay = self._replay(caller, idempotency)
            if replay is not None:
                return replay
            for attempt in range(1, _MAX_ATTEMPTS + 1):
                outcome = self._attempt(caller, specs, batch, idempotency)
                if outcome is not None:
                    return outcome
                _log.info("write conflict, retrying", extra={"attempt": attempt})
        msg = (
            f"gave up after {_MAX_ATTEMPTS} attempts: other writers kept changing the same memories"
        )
        raise ConcurrentWriteError(msg)

    def _replay(self, caller: Caller, idempotency: tuple[str, str] | None) -> WriteOutcome | None:
        if idempotency is None:
            return None
        found = find_response(self.log.datastore, caller, *idempotency)
        return None if found is None else WriteOutcome(found[0], found[1], replayed=True)

    def _build(
        self, caller: Caller, specs: Sequence[WriteSpec], batch: bool
    ) -> tuple[UnitOfWork, list[Item]]:
        uow = UnitOfWork(self.log, caller)
        items: list[Item] = []
        for index, spec in enumerate(specs):
            try:
                items.append(self._apply(uow, spec, items))
            except (InvalidInputError, NotFoundError) as e:
                if batch:
                    e.args = (f"item {index}: {e.args[0]}",)
                raise
        return uow, items

    def _attempt(
        self,
        caller: Caller,
        specs: Sequence[WriteSpec],
        batch: bool,
        idempotency: tuple[str, str] | None,
    ) -> WriteOutcome | None:
        """Build and record once; return None when a concurrent writer won."""
        uow, items = self._build(caller, specs, batch)

        def render(positions: Positions) -> dict[str, Any]:
            results = [
                {
                    **i.fields,
                    "position": i.position if i.last_event is None else positions[i.last_event],
                }
                for i in items
            ]
            return {"results": results} if batch else results[0]

        if not any(a.pending_events for a in uow.aggregates.values()):
            # Every item replayed an earlier decision: nothing to record.
            return WriteOutcome(200, render({}), replayed=False)
        if idempotency is not None:
            uow.context.idempotency = IdempotencyRecord(
                caller.principal_id, idempotency[0], idempotency[1], 201, render
            )
        try:
            recordings = self.log.record(uow.aggregates.values(), uow.context)
        except IntegrityError:
            # Either the same Idempotency-Key committed first (replay it) or
            # another write took the next version of one of our aggregates.
            return self._replay(caller, idempotency)
        except (OperationalError, InterfaceError) as e:
            # Lost or refused connections; any other database error is a bug
            # and propagates as one.
            msg = f"the event log could not be written: {e}"
            raise DatabaseUnavailableError(msg) from e
        if uow.context.response is not None:
            return WriteOutcome(201, uow.context.response, replayed=False)
        positions = {
            (UUID(str(r.notification.originator_id)), r.notification.originator_version): (
                r.notification.id
            )
            for r in recordings
        }
        return WriteOutcome(201, render(positions), replayed=False)

    # -- one item ---------------------------------------------------------

    def _apply(self, uow: UnitOfWork, spec: WriteSpec, items: list[Item]) -> Item:
        if isinstance(spec, ObservationSpec):
            return self._capture(uow, spec)
        if isinstance(spec, MemorySpec):
            return self._create_memory(uow, spec, items)
        if isinstance(spec, VersionSpec):
            memory = uow.load(_resolve(spec.memory_id, items), Memory, "memory")
            version_id = self._record_version(
                uow, memory, spec.content, spec.evidence, spec.model_id, spec.trust, items
            )
            return Item(
                memory.id,
                (memory.id, memory.version),
                {"memory_id": str(memory.id), "version_id": str(version_id)},
            )
        if isinstance(spec, RetractSpec):
            return decide_retract(uow, spec)
        if isinstance(spec, WithdrawSpec):
            return decide_withdraw(uow, spec)
        if isinstance(spec, LabelSpec):
            return decide_label(uow, spec)
        if isinstance(spec, RetentionSpec):
            return self._set_retention(uow, spec)
        if isinstance(spec, EraseSpec):
            return decide_erase(uow, spec)
        if isinstance(spec, TenantDeletionSpec):
            return decide_tenant_deletion(uow, spec.reason)
        return self._add_edge(uow, spec, items)

    def _add_edge(self, uow: UnitOfWork, spec: EdgeSpec, items: list[Item]) -> Item:
        """Add an edge as an operator's decision; the same edge again replays it."""
        source = uow.load(_resolve(spec.memory_id, items), Memory, "memory")
        target = uow.load(_resolve(spec.target_id, items), Memory, "target memory")

        def take(decision_id: UUID) -> Operations:
            if source.has_edge(spec.kind, target.id):
                return [], [], []
            edge_id = source.add_edge(
                spec.kind, target, principal_id=uow.caller.principal_id, decision_id=decision_id
            )
            accepted = {
                "op": "add_edge",
                "edge_id": str(edge_id),
                "memory_id": str(source.id),
                "kind": spec.kind,
                "target_id": str(target.id),
            }
            return [accepted], [], [seen_version(source), seen_version(target)]

        decided = record_decision(
            uow,
            kind="add_edge",
            subject=f"memory:{source.id}",
            params={"kind": spec.kind, "target_id": str(target.id)},
            inputs=[
                {"kind": "memory", "id": str(source.id)},
                {"kind": "memory", "id": str(target.id)},
            ],
            take=take,
            nothing_to_do=EdgeExistsError(
                f"memory {source.id} already has a {spec.kind!r} edge to {target.id}"
            ),
        )
        edge = decided.fields["accepted"][0]
        return Item(
            UUID(edge["edge_id"]),
            decided.last_event,
            {
                "id": edge["edge_id"],
                "memory_id": edge["memory_id"],
                "kind": edge["kind"],
                "target_id": edge["target_id"],
                "decision_id": decided.fields["id"],
                "replayed": decided.fields["replayed"],
            },
            position=decided.position,
        )

    def _capture(self, uow: UnitOfWork, spec: ObservationSpec) -> Item:
        data = encode_content(
            spec.content,
            limit_bytes=MAX_OBSERVATION_BYTES,
            what="observation content",
            allow_blank=True,
        )
        received_at = self.clock()
        captured_at = spec.captured_at or received_at
        if captured_at > received_at + self.policy.clock_skew:
            msg = f"captured_at {captured_at.isoformat()} is in the future"
            raise InvalidInputError(msg)
        if uow.retention is None:  # once per request, however many captures it holds
            uow.retention = self.retention(uow.caller.tenant_id)
        raw, transient = uow.retention
        deadline = retention_deadline(
            received_at, transient=spec.transient, raw_retention=raw, transient_retention=transient
        )
        observation = Observation(
            tenant_id=uow.caller.tenant_id,
            digest=uow.store_payload(data),
            size_bytes=len(data),
            media_type=spec.media_type,
            source=spec.source,
            captured_at=captured_at,
            transient=spec.transient,
            retention_deadline=deadline,
            principal_id=uow.caller.principal_id,
        )
        uow.add(observation)
        return Item(
            observation.id,
            (observation.id, observation.version),
            {
                "id": str(observation.id),
                "retention_deadline": deadline.isoformat(),
            },
        )

    def retention(self, tenant_id: UUID) -> tuple[timedelta, timedelta]:
        """Return (raw, transient) retention for new captures: the tenant's own, if
        it set one, else the deployment's (which is also the maximum)."""
        with tenant_transaction(self.log.datastore, tenant_id, commit=False) as cur:
            cur.execute(
                f'SELECT raw_hours, transient_hours FROM "{self.log.datastore.schema}"'
                ".tenant_retention"
            )
            row = cur.fetchone()
        if row is None:
            return self.policy.raw_retention, self.policy.transient_retention
        return (
            min(self.policy.raw_retention, timedelta(hours=row["raw_hours"])),
            min(self.policy.transient_retention, timedelta(hours=row["transient_hours"])),
        )

    def _set_retention(self, uow: UnitOfWork, spec: RetentionSpec) -> Item:
        tenant = uow.load(uow.caller.tenant_id, Tenant, "tenant")
        raw, transient = (int(r / timedelta(hours=1)) for r in self.retention(uow.caller.tenant_id))
        raw_hours = raw if spec.raw_hours is None else spec.raw_hours
        transient_hours = transient if spec.transient_hours is None else spec.transient_hours
        tenant.set_retention(
            raw_hours=raw_hours,
            transient_hours=transient_hours,
            max_raw_hours=int(self.policy.raw_retention / timedelta(hours=1)),
            max_transient_hours=int(self.policy.transient_retention / timedelta(hours=1)),
            principal_id=uow.caller.principal_id,
        )
        return Item(
            tenant.id,
            (tenant.id, tenant.version),
            {"raw_hours": raw_hours, "transient_hours": transient_hours},
        )

    def _create_memory(self, uow: UnitOfWork, spec: MemorySpec, items: list[Item]) -> Item:
        memory = Memory.create(
            tenant_id=uow.caller.tenant_id,
            memory_type=spec.memory_type,
            scope=spec.scope,
            project=spec.project,
            topic=spec.topic,
            principal_id=uow.caller.principal_id,
        )
        version_id = self._record_version(
            uow, memory, spec.content, spec.evidence, spec.model_id, spec.trust, items
        )
        uow.add(memory)
        return Item(
            memory.id,
            (memory.id, memory.version),
            {"id": str(memory.id), "version_id": str(version_id)},
        )

    def _record_version(
        self,
        uow: UnitOfWork,
        memory: Memory,
        content: str,
        evidence: tuple[EvidenceSpec, ...],
        model_id: str | None,
        trust: float,
        items: list[Item],
    ) -> UUID:
        data = encode_content(
            content, limit_bytes=MAX_VERSION_BYTES, what="memory content", allow_blank=False
        )
        excerpts: list[Excerpt] = []
        for cited in evidence:
            observation = uow.load(
                _resolve(cited.observation_id, items), Observation, "observation"
            )
            if observation.erased_by is not None:
                msg = (
                    f"observation {observation.id} was erased "
                    f"(decision {observation.erased_by}) and cannot be cited"
                )
                raise InvalidInputError(msg)
            if observation.retracted_by is not None:
                msg = (
                    f"observation {observation.id} was retracted as evidence "
                    f"(decision {observation.retracted_by}) and cannot be cited"
                )
                raise InvalidInputError(msg)
            excerpts.append(
                cut_excerpt(observation.id, uow.content_of(observation), cited.start, cited.end)
            )
        return memory.record_version(
            content_digest=uow.store_payload(data),
            size_bytes=len(data),
            excerpts=tuple(excerpts),
            principal_id=uow.caller.principal_id,
            model_id=model_id,
            trust=trust,
        )


def _resolve(ref: Id, items: list[Item]) -> UUID:
    if isinstance(ref, UUID):
        return ref
    if not 0 <= ref.index < len(items):
        msg = f"reference ${ref.index} does not name an earlier item of this batch"
        raise InvalidInputError(msg)
    return items[ref.index].id
