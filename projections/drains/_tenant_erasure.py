"""The tenant erasure drain: erase a deleted tenant in bounded batches, then complete it.

A batch is whatever is not erased yet, so a killed pass loses nothing and the
next pass goes on (``palimpsest.projections.commands.tenant_deletion`` closes the tenant).
A batch is at most the erasure's own limit (``MAX_BATCH_ITEMS`` ids, half
observations, half memories), whatever the drain batch is set to. A pass
reads only tenants marked for deletion (:mod:`palimpsest.projections.store.work_due`);
one with no deletion open is recorded done.
"""

from __future__ import annotations

import logging
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from palimpsest.domain.limits import MAX_BATCH_ITEMS
from palimpsest.domain.tenant import Tenant, principal_id_for
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.erasure import EraseSpec, decide_erase
from palimpsest.projections.commands.tenant_deletion import DELETION_PRINCIPAL
from palimpsest.projections.commands.unit_of_work import UnitOfWork
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_scope, tenant_transaction
from palimpsest.projections.store.work_due import marked_tenants, note_done

__all__ = [
    "MAX_ERASURE_BATCH",
    "erase_deleted_tenants",
    "erase_tenant",
]

MAX_ERASURE_BATCH = MAX_BATCH_ITEMS // 2
"""Most observations (and most memories) one batch erases: together, the erasure's limit."""

_log = logging.getLogger(__name__)


def _open_deletion(log: EventLog, tenant_id: UUID) -> UUID | None:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT decision_id FROM {schema}.tenant_deletions"
                " WHERE completed_position IS NULL",
                log.datastore.schema,
            )
        )
        row = cur.fetchone()
    return None if row is None else UUID(str(row["decision_id"]))


def _remaining(log: EventLog, tenant_id: UUID, limit: int) -> tuple[list[UUID], list[UUID]]:
    """Return up to ``limit`` observations and memories of the tenant not erased yet."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT observation_id FROM {schema}.observation_deadlines"
                " WHERE erased_position IS NULL ORDER BY observation_id LIMIT %s",
                schema,
            ),
            (limit,),
        )
        observations = [row["observation_id"] for row in cur]
        cur.execute(
            schema_sql(
                "SELECT memory_id FROM {schema}.memory_index"
                " WHERE erased_position IS NULL ORDER BY memory_id LIMIT %s",
                schema,
            ),
            (limit,),
        )
        memories = [row["memory_id"] for row in cur]
    return observations, memories


def erase_tenant(log: EventLog, tenant_id: UUID, seen: int, *, limit: int = 200) -> int:
    """Erase one batch of a tenant being deleted (up to ``limit`` observations and
    ``limit`` memories, at most :data:`MAX_ERASURE_BATCH` each), or complete its
    deletion when nothing is left; with no deletion open, record the tenant done as
    of mark ``seen`` (read before calling).

    Returns:
        How many observations and memories this batch erased.
    """
    deletion = _open_deletion(log, tenant_id)
    if deletion is None:
        note_done(log.datastore, tenant_id, "deletion", seen)
        return 0
    principal_id = principal_id_for(tenant_id, DELETION_PRINCIPAL)
    caller = Caller(tenant_id, principal_id, DELETION_PRINCIPAL, "admin")
    observations, memories = _remaining(log, tenant_id, min(limit, MAX_ERASURE_BATCH))
    with tenant_scope(tenant_id):
        uow = UnitOfWork(log, caller)
        if observations or memories:
            spec = EraseSpec(
                tuple(observations), tuple(memories), "tenant deletion", part_of=deletion
            )
            decide_erase(uow, spec)
        else:
            tenant = uow.load(tenant_id, Tenant, "tenant")
            tenant.complete_deletion(principal_id=principal_id)
        try:
            log.record(uow.aggregates.values(), uow.context)
        except IntegrityError:
            return 0  # a concurrent pass took this batch; the next finds what is left
    _log.info(
        "tenant deletion batch",
        extra={
            "tenant_id": str(tenant_id),
            "erased": len(observations) + len(memories),
            "completed": not (observations or memories),
        },
    )
    return len(observations) + len(memories)


def erase_deleted_tenants(log: EventLog, *, limit: int = 200) -> int:
    """Erase one batch of each tenant being deleted (see :func:`erase_tenant`).

    A tenant's failure is raised (the drain loop and the workers run tenants one
    at a time with :func:`erase_tenant` instead).

    Returns:
        How many observations and memories this pass erased.
    """
    return sum(
        erase_tenant(log, tenant_id, seen, limit=limit)
        for tenant_id, seen in marked_tenants(log.datastore, "deletion").items()
    )
