"""The tenant's judgment policy: whether the forgetting pass may judge its memories,
and its daily budget of judge calls and tokens.

The pass reads the policy from the log immediately before every call to a
judge (:func:`judgment_for`), so an opt-out takes effect at the next call,
not at the next run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from palimpsest.domain.tenant import Tenant
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.unit_of_work import Item
from palimpsest.projections.store.aggregates import load_aggregate

if TYPE_CHECKING:
    from uuid import UUID

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "JudgmentPolicy",
    "JudgmentSpec",
    "NOT_OPTED_IN",
    "judgment_for",
    "tenant_name",
]


@dataclass(frozen=True)
class JudgmentPolicy:
    """Whether a tenant opted in to the forgetting pass, and its daily budget."""

    enabled: bool
    daily_calls: int
    daily_tokens: int


NOT_OPTED_IN = JudgmentPolicy(enabled=False, daily_calls=0, daily_tokens=0)
"""The policy of a tenant no administrator opted in."""


def judgment_for(log: EventLog, tenant_id: UUID) -> JudgmentPolicy:
    """Return the tenant's judgment policy as the log holds it now (not opted in
    until an administrator sets it)."""
    tenant = load_aggregate(log, tenant_id, tenant_id, Tenant, "tenant")
    if tenant.judgment is None:
        return NOT_OPTED_IN
    enabled, daily_calls, daily_tokens = tenant.judgment
    return JudgmentPolicy(bool(enabled), int(daily_calls), int(daily_tokens))


def tenant_name(log: EventLog, tenant_id: UUID) -> str:
    """Return the tenant's name."""
    return str(load_aggregate(log, tenant_id, tenant_id, Tenant, "tenant").name)


@dataclass(frozen=True)
class JudgmentSpec(WriteSpec):
    """Opt the tenant in or out of the forgetting pass, with its daily budget."""

    role = "admin"
    action = "set the judgment policy"

    enabled: bool
    daily_calls: int
    daily_tokens: int

    def apply(self, batch: Batch) -> Item:
        """Record the policy on the tenant."""
        uow = batch.uow
        tenant = uow.load(uow.caller.tenant_id, Tenant, "tenant")
        tenant.set_judgment(
            enabled=self.enabled,
            daily_calls=self.daily_calls,
            daily_tokens=self.daily_tokens,
            principal_id=uow.caller.principal_id,
        )
        return Item(
            tenant.id,
            (tenant.id, tenant.version),
            {
                "enabled": self.enabled,
                "daily_calls": self.daily_calls,
                "daily_tokens": self.daily_tokens,
            },
        )
