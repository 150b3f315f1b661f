"""The tenant's forgetting policy: set by an administrator, read by the decay cycle.

The cycle reads the policy from the log (:func:`forgetting_for`) once per run;
the policy's ``version`` (how many times it was set) is recorded with the cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from palimpsest.domain.forgetting_policy import ForgettingPolicy
from palimpsest.domain.tenant import Tenant
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.unit_of_work import Item
from palimpsest.projections.store.aggregates import load_aggregate

if TYPE_CHECKING:
    from uuid import UUID

    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["ForgettingPolicySpec", "forgetting_for"]


def forgetting_for(log: EventLog, tenant_id: UUID) -> ForgettingPolicy:
    """Return the tenant's forgetting policy as the log holds it now (the defaults,
    version 0, until an administrator sets one)."""
    tenant = load_aggregate(log, tenant_id, tenant_id, Tenant, "tenant")
    return tenant.forgetting_policy()


@dataclass(frozen=True)
class ForgettingPolicySpec(WriteSpec):
    """Set the tenant's forgetting policy: the defaults overridden by ``values``, or,
    with ``merge``, the current policy overridden by them (a ``PATCH``)."""

    role = "admin"
    action = "set the forgetting policy"

    values: dict[str, Any] = field(default_factory=dict)
    merge: bool = False

    def apply(self, batch: Batch) -> Item:
        """Record the policy on the tenant.

        Raises:
            InvalidInputError: see :meth:`ForgettingPolicy.checked`.
            InconsistentPolicyError: see :meth:`ForgettingPolicy.require_consistent`.
        """
        uow = batch.uow
        tenant = uow.load(uow.caller.tenant_id, Tenant, "tenant")
        # Merged with the policy loaded in this write's transaction, so two PATCHes
        # never lose each other's fields (the second's version check refuses a race).
        values = tenant.forgetting_policy().merged(self.values) if self.merge else self.values
        ForgettingPolicy.checked(values).require_consistent()
        policy = tenant.set_forgetting(dict(values), principal_id=uow.caller.principal_id)
        return Item(
            tenant.id,
            (tenant.id, tenant.version),
            {**policy.as_values(), "version": policy.version},
        )
