"""What one insert transaction writes besides its events, and several writes of one
tenant merged into one (a group commit's)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.domain.dependency import Dependencies

if TYPE_CHECKING:
    from palimpsest.projections.store.archival_allowance import ArchivalClaim

Positions = Mapping[tuple[UUID, int], int]
"""Log position of each written event, by (aggregate id, aggregate version)."""


@dataclass(frozen=True)
class TokenRow:
    """A token's lookup row, written with its ``TokenIssued`` event."""

    token_digest: str
    token_id: UUID
    principal_id: UUID
    principal_name: str
    role: str


@dataclass(frozen=True)
class IdempotencyRecord:
    """The request an ``Idempotency-Key`` stands for, and how to render its response."""

    principal_id: UUID
    key: str
    request_digest: str
    status_code: int
    render: Callable[[Positions], dict[str, Any]]


@dataclass
class WriteContext:
    """What one insert transaction writes besides the events."""

    tenant_id: UUID
    payloads: dict[str, bytes] = field(default_factory=dict)
    tokens: list[TokenRow] = field(default_factory=list)
    revoked_tokens: list[str] = field(default_factory=list)
    """Digests of tokens revoked by this write: their lookup rows go with it."""
    idempotency: IdempotencyRecord | None = None
    dependencies: Dependencies | None = None
    response: dict[str, Any] | None = None
    read_versions: dict[UUID, int] = field(default_factory=dict)
    """Aggregates the write read but does not change, at the version it read."""
    loaded: frozenset[UUID] = frozenset()
    """Every aggregate the write read or changed."""
    members: list[WriteContext] = field(default_factory=list)
    """The writes a group commit merged into this one (each with its own
    idempotency record and response); empty for a write of its own."""
    archivals: ArchivalClaim | None = None
    """The memories the write archives that the collapse guard's allowance must hold,
    reserved in its transaction (refused whole if they cannot be). A write with
    one commits alone, never in a group commit: its refusal is its own."""


def queueable_write(write: WriteContext | None) -> bool:
    """Whether ``write``'s transaction may read no answer before its ``COMMIT`` (it
    checks no read and records no idempotency response), so that it is worth
    composing for :mod:`palimpsest.projections.store.queued` (which finds out for certain)."""
    if write is None:
        return True
    writes = write.members or [write]
    return not write.read_versions and all(
        w.idempotency is None and w.archivals is None for w in writes
    )


class UnmergeableError(Exception):
    """Writes that cannot be recorded as one (two set the same single-valued row)."""


def merged(writes: list[WriteContext]) -> WriteContext:
    """Return one tenant's writes as one write: what each inserts, side by side.

    Raises:
        UnmergeableError: two of them set the same single-valued thing (a tenant's
            retention, its deletion): they are inserted one savepoint each instead.
    """
    if len(writes) == 1:
        return writes[0]
    one = WriteContext(tenant_id=writes[0].tenant_id, members=writes)
    found = [w.dependencies for w in writes if w.dependencies is not None]
    for write in writes:
        one.payloads.update(write.payloads)
        one.tokens += write.tokens
        one.revoked_tokens += write.revoked_tokens
        # Two that read one aggregate at different versions cannot both be
        # current: the check under the lock refuses the group, which is retried.
        one.read_versions.update(write.read_versions)
    one.loaded = frozenset().union(*(w.loaded for w in writes))
    one.dependencies = _merged_dependencies(found) if found else None
    return one


def _merged_dependencies(found: list[Dependencies]) -> Dependencies:
    """Return the writes' dependencies as one write's: touched memories and rows of
    every type side by side.

    Raises:
        UnmergeableError: two writes hold a row of a type a write holds at most one of.
    """
    one = Dependencies()
    for each in found:
        one.touched |= each.touched
        for kind, rows in each.rows.items():
            held = one.rows.get(kind)
            if held is None:
                one.rows[kind] = list(rows)
            elif kind.one_per_write:
                raise UnmergeableError(kind.__name__)
            else:
                held.extend(rows)
    return one
