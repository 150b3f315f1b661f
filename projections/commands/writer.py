"""The write path: check roles, build events on aggregates, then save once.

A request (one write, or a batch of up to 1,000) is one unit of work: every
spec's role is checked against the caller before anything is read, every
aggregate it touches is loaded from the log, every decision is taken on
those aggregates (never on a read model), and one ``save()`` records all
events, their payload rows and the idempotency record in one transaction. A
request that is refused raises before anything is saved, so it writes
nothing.

Each spec applies itself (:class:`~palimpsest.projections.commands.spec.WriteSpec`):
the writer only orchestrates: roles, the idempotency lookup, the unit of
work, recording with retries, and the outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError

from palimpsest.domain.errors import InvalidInputError, NotFoundError
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.capture import ObservationSpec
from palimpsest.projections.commands.decisions import LabelSpec, RetractSpec, WithdrawSpec
from palimpsest.projections.commands.erasure import EraseSpec
from palimpsest.projections.commands.idempotency import find_response
from palimpsest.projections.commands.memory import EdgeSpec, EvidenceSpec, MemorySpec, VersionSpec
from palimpsest.projections.commands.policy import CapturePolicy
from palimpsest.projections.commands.retention import RetentionSpec, retention_for
from palimpsest.projections.commands.settlement import SettleSpec
from palimpsest.projections.commands.spec import Batch, Ref, WriteSpec
from palimpsest.projections.commands.tenant_deletion import TenantDeletionSpec
from palimpsest.projections.commands.tokens import forget_tenant_tokens
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
from palimpsest.projections.store.aggregate_cache import aggregate_cache
from palimpsest.projections.store.errors import (
    ConcurrentWriteError,
    DatabaseUnavailableError,
    StaleReadError,
)
from palimpsest.projections.store.eventlog import EventLog, IdempotencyRecord, Positions
from palimpsest.projections.store.ids import as_uuid
from palimpsest.projections.store.tenancy import tenant_scope

# The specs are re-exported: the writer's callers name what they ask it to write.
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
    "SettleSpec",
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
            PermissionDeniedError: the caller's role does not grant a spec's role
                (checked first: nothing is read or written).
            IdempotencyKeyReusedError: the key was used for a different request.
            InvalidInputError, NotFoundError, ConflictError: a spec is refused.
            ConcurrentWriteError: other writers kept winning the same aggregates.
        """
        for kind in dict.fromkeys(type(spec) for spec in specs):
            caller.require(kind.role, kind.action)
        with tenant_scope(caller.tenant_id):
            replay = self._replay(caller, idempotency)
            if replay is not None:
                return replay
            for attempt in range(1, _MAX_ATTEMPTS + 1):
                outcome = self._attempt(caller, specs, batch, idempotency)
                if outcome is not None:
                    if any(isinstance(spec, TenantDeletionSpec) for spec in specs):
                        # Its tokens now answer 410: stop trusting this process's copies.
                        forget_tenant_tokens(caller.tenant_id)
                    return outcome
                _log.info("write conflict, retrying", extra={"attempt": attempt})
        msg = (
            f"gave up after {_MAX_ATTEMPTS} attempts: other writers kept changing the same memories"
        )
        raise ConcurrentWriteError(msg)

    def retention(self, tenant_id: UUID) -> tuple[timedelta, timedelta]:
        """Return (raw, transient) retention for new captures: the tenant's own, if
        it set one, else the deployment's (which is also the maximum)."""
        return retention_for(self.log, tenant_id, self.policy)

    def _replay(self, caller: Caller, idempotency: tuple[str, str] | None) -> WriteOutcome | None:
        if idempotency is None:
            return None
        found = find_response(self.log.datastore, caller, *idempotency)
        return None if found is None else WriteOutcome(found[0], found[1], replayed=True)

    def _build(self, caller: Caller, specs: Sequence[WriteSpec], batch: bool) -> Batch:
        applied = Batch(UnitOfWork(self.log, caller), self.policy, self.clock)
        for index, spec in enumerate(specs):
            try:
                applied.items.append(spec.apply(applied))
            except (InvalidInputError, NotFoundError) as e:
                if batch:
                    e.args = (f"item {index}: {e.args[0]}",)
                raise
        return applied

    def _attempt(
        self,
        caller: Caller,
        specs: Sequence[WriteSpec],
        batch: bool,
        idempotency: tuple[str, str] | None,
    ) -> WriteOutcome | None:
        """Build and record once; return None when a concurrent writer won."""
        with self.log.group.building():  # a group about to commit may wait for it
            applied = self._build(caller, specs, batch)
        uow, items = applied.uow, applied.items

        def render(positions: Positions) -> dict[str, Any]:
            return _render(items, positions, batch)

        if not any(a.pending_events for a in uow.aggregates.values()):
            # Every item replayed an earlier decision: nothing to record.
            return WriteOutcome(200, render({}), replayed=False)
        if idempotency is not None:
            uow.context.idempotency = IdempotencyRecord(
                caller.principal_id, idempotency[0], idempotency[1], 201, render
            )
        try:
            # Concurrent writes of this process share one transaction (a group
            # commit); each is answered after it commits, with its own positions.
            recordings = self.log.record(uow.aggregates.values(), uow.context, grouped=True)
        except (IntegrityError, StaleReadError):
            # Either the same Idempotency-Key committed first (replay it), or
            # another write took the next version of one of our aggregates or
            # changed one we decided from: build the write again. (Never this
            # write's own earlier try: the log settles that, store/unknown_commits.py.)
            return self._replay(caller, idempotency)
        except (OperationalError, InterfaceError) as e:
            # Lost or refused connections; any other database error is a bug
            # and propagates as one.
            msg = f"the event log could not be written: {e}"
            raise DatabaseUnavailableError(msg) from e
        # Committed: the next write (or drain) of these starts from them as they are now.
        aggregate_cache(self.log).keep(caller.tenant_id, uow.aggregates.values())
        if uow.context.response is not None:
            return WriteOutcome(201, uow.context.response, replayed=False)
        positions = {
            (as_uuid(r.notification.originator_id), r.notification.originator_version): (
                r.notification.id
            )
            for r in recordings
        }
        return WriteOutcome(201, render(positions), replayed=False)


def _render(items: list[Item], positions: Positions, batch: bool) -> dict[str, Any]:
    """Return the response body: each item's fields and the log position it ends at."""
    results = [
        {**i.fields, "position": i.position if i.last_event is None else positions[i.last_event]}
        for i in items
    ]
    return {"results": results} if batch else results[0]
