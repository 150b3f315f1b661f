"""The collapse guard: how many memories a tenant's day may see archived without a
person forgetting each one.

Every write that archives (forgets, or supersedes) memories by applying a
proposal, and every automatic archival (the decay cycle's ``decayed`` archives,
consolidation's automatic merges), claims the memories it archives from one
per-tenant allowance of the write's UTC day (by the writer's clock): at most
``collapse_share`` of the tenant's memories that are not erased, and at least
``collapse_minimum``. The claim is reserved in the write's own transaction
(:mod:`palimpsest.projections.store.archival_allowance`), so concurrent writes never
together pass it, and a write it cannot hold is refused whole
(``CollapseGuardError``). A person's own ``forget`` is not counted: the guard
stands between automation and the tenant's memories, not in a person's way.

An administrator's confirmation (``confirm_bulk``) passes the guard: the memories
it archives are counted all the same, so the day's automatic archives find that
much less left (none, once confirmations spent the allowance).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from palimpsest.projections.store.archival_allowance import ArchivalClaim
from palimpsest.projections.store.archival_allowance import archivals_left as _left

if TYPE_CHECKING:
    from palimpsest.projections.commands._spec import Batch
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "CollapseGuardSettings",
    "archivals_left",
    "claim_archivals",
    "guard_day",
]


class CollapseGuardSettings(BaseSettings):
    """The collapse guard's allowance (``PALIMPSEST_COLLAPSE_SHARE``,
    ``PALIMPSEST_COLLAPSE_MINIMUM``): a tenant's day may see at most ``collapse_share``
    of its memories archived by proposals and automatically, and at least
    ``collapse_minimum`` always may be, without an administrator's confirmation."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    collapse_share: float = Field(default=0.05, ge=0.0, le=1.0)
    collapse_minimum: int = Field(default=5, ge=0)


def guard_day(moment: datetime) -> date:
    """Return the UTC day whose allowance a write at ``moment`` spends."""
    return moment.astimezone(UTC).date()


def claim_archivals(
    batch: Batch, memories: int, guard: CollapseGuardSettings, *, confirmed: bool = False
) -> None:
    """Claim ``memories`` archived by the batch's write from its day's allowance (by the
    batch's clock), to be reserved in its transaction; ``confirmed``: an
    administrator confirmed them past the guard (the caller checked the role).

    The write is refused as a whole (``CollapseGuardError``, when it is recorded) if
    the allowance cannot hold them.
    """
    if memories <= 0:
        return
    claim = ArchivalClaim(
        day=guard_day(batch.clock()),
        guarded=0 if confirmed else memories,
        confirmed=memories if confirmed else 0,
        share=guard.collapse_share,
        minimum=guard.collapse_minimum,
    )
    context = batch.uow.context
    context.archivals = claim if context.archivals is None else context.archivals.plus(claim)


def archivals_left(log: EventLog, tenant_id: UUID, day: date, guard: CollapseGuardSettings) -> int:
    """Return how many memories the tenant's allowance of ``day`` still holds: what an
    automatic archival may plan on (only its write's reservation decides)."""
    return _left(
        log.datastore,
        tenant_id,
        day,
        share=guard.collapse_share,
        minimum=guard.collapse_minimum,
    )
