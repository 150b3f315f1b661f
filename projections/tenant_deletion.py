"""Tenant deletion: close a tenant, then erase everything it holds in batches.

``DELETE /v1/tenant`` records a ``tenant_deletion`` decision and
``TenantDeletionRequested``; from that write on, the tenant is closed (the
API answers 410 to everything but the receipt). The erasure drain then
erases the tenant's observations and memories through the ordinary erasure
path, a bounded batch per write, each batch a decision that is ``part_of``
the deletion. The database is the truth: a batch is whatever is not erased
yet, so a killed pass loses nothing and the next pass goes on. When nothing
is left, ``TenantDeleted`` completes the receipt.
"""

from __future__ import annotations

import hashlib
import logging
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from domain.errors import ConflictError
from domain.tenant import Tenant, principal_id_for
from projections._tenancy import known_tenants, tenant_scope, tenant_transaction
from projections.decisions import Operations, record_decision
from projections.erasure import EraseSpec, decide_erase
from projections.eventlog import EventLog
from projections.migrations import EVENTS_TABLE
from projections.unit_of_work import Caller, Item, UnitOfWork

__all__ = [
    "DELETION_PRINCIPAL",
    "confirmation_token",
    "decide_tenant_deletion",
    "erase_deleted_tenants",
]

_log = logging.getLogger(__name__)

DELETION_PRINCIPAL = "system:erasure"
"""The principal recorded on the erasure batches of a tenant deletion."""


def confirmation_token(log: EventLog, tenant_id: UUID) -> str:
    """Return the token that confirms deleting the tenant as it stands now.

    It names the tenant and its newest log position, so a confirmation
    given before another write no longer matches: the caller confirms the
    tenant it looked at. It is not a secret (the caller is already an admin).
    """
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT coalesce(max(notification_id), 0) AS head FROM "{log.datastore.schema}"'
            f'."{EVENTS_TABLE}"'
        )
        row = cur.fetchone()
    head = row["head"] if row else 0
    text = f"palimpsest-tenant-deletion:{tenant_id}:{head}"
    return "del_" + hashlib.sha256(text.encode()).hexdigest()[:32]


def decide_tenant_deletion(uow: UnitOfWork, reason: str) -> Item:
    """Close the caller's tenant for deletion, as a decision.

    Raises:
        ConflictError: a deletion was requested already (its receipt stands).
    """
    tenant = uow.load(uow.caller.tenant_id, Tenant, "tenant")

    def take(decision_id: UUID) -> Operations:
        if not tenant.request_deletion(
            decision_id=decision_id, principal_id=uow.caller.principal_id
        ):
            return [], [], []
        return [{"op": "delete_tenant", "tenant_id": str(tenant.id)}], [], []

    return record_decision(
        uow,
        kind="tenant_deletion",
        subject=f"tenant:{tenant.id}",
        params={"reason": reason},
        inputs=[{"kind": "tenant", "id": str(tenant.id)}],
        take=take,
        nothing_to_do=ConflictError(
            f"tenant {tenant.id} is already being deleted (decision {tenant.deletion})"
        ),
    )


def _open_deletion(log: EventLog, tenant_id: UUID) -> UUID | None:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT decision_id FROM "{log.datastore.schema}".tenant_deletions'
            " WHERE completed_position IS NULL"
        )
        row = cur.fetchone()
    return None if row is None else UUID(str(row["decision_id"]))


def _remaining(log: EventLog, tenant_id: UUID, limit: int) -> tuple[list[UUID], list[UUID]]:
    """Return up to ``limit`` observations and memories of the tenant not erased yet."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT observation_id FROM "{schema}".observation_deadlines'
            " WHERE erased_position IS NULL ORDER BY observation_id LIMIT %s",
            (limit,),
        )
        observations = [row["observation_id"] for row in cur]
        cur.execute(
            f'SELECT memory_id FROM "{schema}".memory_index'
            " WHERE erased_position IS NULL ORDER BY memory_id LIMIT %s",
            (limit,),
        )
        memories = [row["memory_id"] for row in cur]
    return observations, memories


def erase_deleted_tenants(log: EventLog, *, limit: int = 200) -> int:
    """Erase one batch (up to ``limit`` observations and ``limit`` memories) of each
    tenant being deleted, or complete its deletion when nothing is left.

    Returns:
        How many observations and memories this pass erased.
    """
    erased = 0
    for tenant_id in known_tenants(log.datastore):
        deletion = _open_deletion(log, tenant_id)
        if deletion is None:
            continue
        principal_id = principal_id_for(tenant_id, DELETION_PRINCIPAL)
        caller = Caller(tenant_id, principal_id, DELETION_PRINCIPAL, "admin")
        observations, memories = _remaining(log, tenant_id, limit)
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
                continue  # a concurrent pass took this batch; the next finds what is left
        erased += len(observations) + len(memories)
        _log.info(
            "tenant deletion batch",
            extra={
                "tenant_id": str(tenant_id),
                "erased": len(observations) + len(memories),
                "completed": not (observations or memories),
            },
        )
    return erased
