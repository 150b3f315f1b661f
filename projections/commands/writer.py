"""The write path: check roles, build events on aggregates, then save once.

A request (one write, or a batch of up to 1,000) is one unit of work: every
spec's role is checked against the caller before anything is read, every
aggregate it touches is loaded from the log, every decision is taken on
those aggregates (never on a read model), and one ``save()`` records all
events, their payload rows and the idempotency record in one transaction. A
request that is refused raises before anything is saved, so it writes
nothing.

Each spec applies itself (:class:`~palimpsest.projections.commands._spec.WriteSpec`):
the writer only orchestrates: roles, the idempotency lookup, the unit of
work, recording with retries, and the outcome. The two writes a route makes most,
creating and revising a memory, take the same steps by name rather than through
``apply`` (:mod:`palimpsest.projections.commands.memories`): one call a reader can
follow from the route to the domain and to :meth:`EventLog.record`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError

from palimpsest.domain.errors import InvalidInputError, NotFoundError
from palimpsest.projections.commands._capture import ObservationSpec
from palimpsest.projections.commands._idempotency import find_response
from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands._retention import RetentionSpec, retention_for
from palimpsest.projections.commands._settlement import SettleSpec
from palimpsest.projections.commands._spec import Batch, Ref, WriteSpec
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.decisions import LabelSpec, RetractSpec, WithdrawSpec
from palimpsest.projections.commands.erasure import EraseSpec
from palimpsest.projections.commands.memory import EdgeSpec, EvidenceSpec, MemorySpec, VersionSpec
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
"""How many times a write is built and recorded before it gives up to concurrent writers."""


@dataclass(frozen=True)
class WriteOutcome:
    """The response of a write, and whether it replays an earlier identical request."""

    status_code: int
    body: dict[str, Any]
    replayed: bool


class Writer:
    """Applies write requests for authenticated callers.

    :meth:`write` applies any specs, each through its ``apply``. The memory writes
    a route calls by name (:mod:`palimpsest.projections.commands.memories`) take the
    same steps themselves: :meth:`replay`, then for each of :meth:`attempts` a unit
    of work (:meth:`begin`) built within :meth:`building` and :meth:`record`-ed.
    """

    log: EventLog
    policy: CapturePolicy
    clock: Callable[[], datetime]

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
            replayed = self.replay(caller, idempotency)
            if replayed is not None:
                return replayed
            for _ in self.attempts():
                with self.building():
                    work = self._build(caller, specs, batch)
                outcome = self.record(work, idempotency, batch=batch)
                if outcome is not None:
                    if any(isinstance(spec, TenantDeletionSpec) for spec in specs):
                        # Its tokens now answer 410: stop trusting this process's copies.
                        forget_tenant_tokens(caller.tenant_id)
                    return outcome
        raise self.gave_up()

    def retention(self, tenant_id: UUID) -> tuple[timedelta, timedelta]:
        """Return (raw, transient) retention for new captures: the tenant's own, if
        it set one, else the deployment's (which is also the maximum)."""
        return retention_for(self.log, tenant_id, self.policy)

    def replay(self, caller: Caller, idempotency: tuple[str, str] | None) -> WriteOutcome | None:
        """Return the recorded response of ``idempotency`` (``(key, digest)``), if this
        key was answered before; None when the write is to be made.

        Raises:
            IdempotencyKeyReusedError: the key was used for a different request.
        """
        if idempotency is None:
            return None
        found = find_response(self.log.datastore, caller, *idempotency)
        return None if found is None else WriteOutcome(found[0], found[1], replayed=True)

    def attempts(self) -> Iterator[int]:
        """Yield the numbers of the tries a write gets (1 to 5),
        noting each one a concurrent writer won; the caller raises :meth:`gave_up`
        when they run out."""
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            yield attempt
            _log.info("write conflict, retrying", extra={"attempt": attempt})

    def gave_up(self) -> ConcurrentWriteError:
        """Return the error of a write whose every attempt a concurrent writer won."""
        msg = (
            f"gave up after {_MAX_ATTEMPTS} attempts: other writers kept changing the same memories"
        )
        return ConcurrentWriteError(msg)

    def building(self) -> AbstractContextManager[None]:
        """Return the context a unit of work is built in: a group of this process
        about to commit may wait for it (:meth:`record` joins that group)."""
        return self.log.group.building()

    def begin(self, caller: Caller) -> Batch:
        """Return an empty unit of work for ``caller``'s write, with the deployment's
        capture policy and clock."""
        return Batch(UnitOfWork(self.log, caller), self.policy, self.clock)

    def record(
        self, work: Batch, idempotency: tuple[str, str] | None, *, batch: bool = False
    ) -> WriteOutcome | None:
        """Record what ``work`` holds in one transaction (:meth:`EventLog.record`, with
        the idempotency record of ``idempotency``) and return the response: each of
        its items (``batch``), or its one item, with the log position it ends at.

        Return None when a concurrent writer won (build the write again); the
        recorded response when the same ``Idempotency-Key`` committed first.

        Raises:
            DatabaseUnavailableError: the connection was lost or refused.
        """
        uow, items = work.uow, work.items

        def render(positions: Positions) -> dict[str, Any]:
            return _render(items, positions, batch)

        if not any(a.pending_events for a in uow.aggregates.values()):
            # Every item replayed an earlier decision: nothing to record.
            return WriteOutcome(200, render({}), replayed=False)
        if idempotency is not None:
            uow.context.idempotency = IdempotencyRecord(
                uow.caller.principal_id, idempotency[0], idempotency[1], 201, render
            )
        try:
            # Concurrent writes of this process share one transaction (a group
            # commit); each is answered after it commits, with its own positions.
            recordings = self.log.record(uow.aggregates.values(), uow.context, grouped=True)
        except (IntegrityError, StaleReadError):
            # Either the same Idempotency-Key committed first (replay it), or
            # another write took the next version of one of our aggregates or
            # changed one we decided from: build the write again. (Never this
            # write's own earlier try: the log settles that, store/_unknown_commits.py.)
            return self.replay(uow.caller, idempotency)
        except (OperationalError, InterfaceError) as e:
            # Lost or refused connections; any other database error is a bug
            # and propagates as one.
            msg = f"the event log could not be written: {e}"
            raise DatabaseUnavailableError(msg) from e
        # Committed: the next write (or drain) of these starts from them as they are now.
        aggregate_cache(self.log).keep(uow.caller.tenant_id, uow.aggregates.values())
        if uow.context.response is not None:
            return WriteOutcome(201, uow.context.response, replayed=False)
        positions = {
            (as_uuid(r.notification.originator_id), r.notification.originator_version): (
                r.notification.id
            )
            for r in recordings
        }
        return WriteOutcome(201, render(positions), replayed=False)

    def _build(self, caller: Caller, specs: Sequence[WriteSpec], batch: bool) -> Batch:
        work = self.begin(caller)
        for index, spec in enumerate(specs):
            try:
                work.items.append(spec.apply(work))
            except (InvalidInputError, NotFoundError) as e:
                if batch:
                    e.args = (f"item {index}: {e.args[0]}",)
                raise
        return work


def _render(items: list[Item], positions: Positions, batch: bool) -> dict[str, Any]:
    """Return the response body: each item's fields and the log position it ends at."""
    results = [
        {**i.fields, "position": i.position if i.last_event is None else positions[i.last_event]}
        for i in items
    ]
    return {"results": results} if batch else results[0]
