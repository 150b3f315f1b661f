"""The tenant's retention of observation bytes: reading it, and setting it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from palimpsest.domain.tenant import Tenant
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.unit_of_work import Item
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from uuid import UUID

    from palimpsest.projections.commands._policy import CapturePolicy
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "RetentionSpec",
    "retention_for",
]

_HOUR = timedelta(hours=1)


def retention_for(
    log: EventLog, tenant_id: UUID, policy: CapturePolicy
) -> tuple[timedelta, timedelta]:
    """Return (raw, transient) retention for new captures: the tenant's own, if
    it set one, else the deployment's (which is also the maximum)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT raw_hours, transient_hours FROM {schema}.tenant_retention",
                log.datastore.schema,
            )
        )
        row = cur.fetchone()
    if row is None:
        return policy.raw_retention, policy.transient_retention
    return (
        min(policy.raw_retention, timedelta(hours=row["raw_hours"])),
        min(policy.transient_retention, timedelta(hours=row["transient_hours"])),
    )


@dataclass(frozen=True)
class RetentionSpec(WriteSpec):
    """Set the tenant's retention of observation bytes, in hours (None keeps the
    current value)."""

    role = "admin"
    action = "set retention"

    raw_hours: int | None
    transient_hours: int | None

    def apply(self, batch: Batch) -> Item:
        """Record the tenant's new retention, within the deployment's maxima."""
        uow, policy = batch.uow, batch.policy
        tenant = uow.load(uow.caller.tenant_id, Tenant, "tenant")
        raw, transient = (
            int(r / _HOUR) for r in retention_for(uow.log, uow.caller.tenant_id, policy)
        )
        raw_hours = raw if self.raw_hours is None else self.raw_hours
        transient_hours = transient if self.transient_hours is None else self.transient_hours
        tenant.set_retention(
            raw_hours=raw_hours,
            transient_hours=transient_hours,
            max_raw_hours=int(policy.raw_retention / _HOUR),
            max_transient_hours=int(policy.transient_retention / _HOUR),
            principal_id=uow.caller.principal_id,
        )
        return Item(
            tenant.id,
            (tenant.id, tenant.version),
            {"raw_hours": raw_hours, "transient_hours": transient_hours},
        )
