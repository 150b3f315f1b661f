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
from dataclasses import dataclass
from uuid import UUID

from psycopg import sql

from palimpsest.domain.errors import ConflictError
from palimpsest.domain.tenant import Tenant
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.decisions import Operations, record_decision
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = [
    "DELETION_PRINCIPAL",
    "TenantDeletionSpec",
    "confirmation_token",
    "decide_tenant_deletion",
]

_log = logging.getLogger(__name__)

DELETION_PRINCIPAL = "system:erasure"
"""The principal recorded on the erasure batches of a tenant deletion."""

_HEAD = sql.SQL("SELECT coalesce(max(notification_id), 0) AS head FROM {schema}.{events}")


def confirmation_token(log: EventLog, tenant_id: UUID) -> str:
    """Return the token that confirms deleting the tenant as it stands now.

    It names the tenant and its newest log position, so a confirmation
    given before another write no longer matches: the caller confirms the
    tenant it looked at. It is not a secret (the caller is already an admin).
    """
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            _HEAD.format(
                schema=sql.Identifier(log.datastore.schema), events=sql.Identifier(EVENTS_TABLE)
            )
        )
        row = cur.fetchone()
    head = row["head"] if row else 0
    text = f"palimpsest-tenant-deletion:{tenant_id}:{head}"
    return "del_" + hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class TenantDeletionSpec(WriteSpec):
    """Close the caller's tenant and have the erasure drain erase all of it."""

    role = "admin"
    action = "delete the tenant"

    reason: str

    def apply(self, batch: Batch) -> Item:
        """Close the tenant, as a decision (see :func:`decide_tenant_deletion`)."""
        return decide_tenant_deletion(batch.uow, self.reason)


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
        reason=reason,
    )
