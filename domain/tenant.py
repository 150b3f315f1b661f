"""The ``Tenant`` aggregate: an isolated account, its principals and their tokens;
and what may name a tenant.

Tenant names are what an operator types (``--tenant default``) and reads in
lists, so two names a person cannot tell apart must not name two tenants.
:func:`checked_tenant_name` refuses what no one can see or read one way:

- control characters, and the invisible "format" characters (Unicode category
  ``Cf``: zero-width spaces and joiners, the byte-order mark, and the bidi
  controls that reorder how the rest displays, U+202A-E and U+2066-9);
- letters from more than one script (``d\u0435fault``, with a Cyrillic ``e``): the
  cross-script confusables. The exceptions are the mixes a language writes
  (Han with Hiragana and Katakana, Han with Hangul), as Unicode's "highly
  restrictive" profile (UTS #39 §5.2) allows. Digits, punctuation and symbols
  belong to no script and go with any. A name all in one other script that
  looks like a Latin one (Cyrillic ``\u0440\u0430\u0443\u0440\u0430``) is not caught: that needs the
  confusables table, which this module does not carry;
- a name that reads as a UUID (``--tenant`` would take it for an id).

Uniqueness compares :func:`tenant_name_key`: NFKC (``default`` in fullwidth
forms is ``default``), case-folded (``DEFAULT`` is ``default``), without surrounding
white space. The name is stored as given.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from palimpsest.domain.errors import InvalidInputError, NotFoundError
from palimpsest.domain.forgetting_policy import DEFAULT_POLICY, ForgettingPolicy
from palimpsest.domain.limits import MAX_DAILY_JUDGE_CALLS, MAX_DAILY_JUDGE_TOKENS
from palimpsest.domain.role import ROLES

__all__ = [
    "InvalidTenantNameError",
    "Tenant",
    "checked_tenant_name",
    "colliding_names",
    "principal_id_for",
    "tenant_name_key",
]

_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Controls, format (invisible) characters, surrogates, private use, unassigned, and
line and paragraph separators: nothing a person reads in a name."""

_COMPATIBLE_SCRIPTS = (
    frozenset({"CJK", "HIRAGANA", "KATAKANA"}),
    frozenset({"CJK", "HANGUL"}),
)
"""Scripts a language writes together (UTS #39's highly restrictive profile)."""


class InvalidTenantNameError(InvalidInputError):
    """Raised when a name cannot name a tenant (422 ``invalid-tenant-name``)."""


def tenant_name_key(name: str) -> str:
    """Return what tenant names are compared by: NFKC, case-folded, trimmed (the
    second NFKC because case folding can leave a string unnormalised)."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return folded.strip()


def _script(char: str) -> str | None:
    """Return the script of a letter, from its Unicode name's first word (no script
    property in the standard library); None for what belongs to no one script."""
    category = unicodedata.category(char)
    # Modifier letters (the Japanese prolonged sound mark, spacing accents) are
    # shared between scripts, as digits and punctuation are.
    if not category.startswith("L") or category == "Lm":
        return None
    words = unicodedata.name(char, "UNKNOWN").split()
    # "CJK UNIFIED IDEOGRAPH-4E00", "CJK COMPATIBILITY IDEOGRAPH-F900": one script.
    return "CJK" if words[0] == "CJK" else words[0]


def _one_script(scripts: set[str]) -> bool:
    return len(scripts) <= 1 or any(scripts <= allowed for allowed in _COMPATIBLE_SCRIPTS)


def checked_tenant_name(name: str, max_chars: int) -> str:
    """Return ``name`` if it can name a tenant.

    Raises:
        InvalidTenantNameError: blank, longer than ``max_chars``, holding a control,
            an invisible or a bidi character, letters of more than one script, or
            reading as a UUID.
    """
    if not name.strip() or len(name) > max_chars:
        msg = f"a tenant name has 1 to {max_chars} characters, not all blank"
        raise InvalidTenantNameError(msg)
    refused = sorted(
        {f"U+{ord(c):04X}" for c in name if unicodedata.category(c) in _REFUSED_CATEGORIES}
    )
    if refused:
        msg = (
            "a tenant name cannot hold control, invisible or bidi characters "
            f"(it holds {', '.join(refused)})"
        )
        raise InvalidTenantNameError(msg)
    scripts = {s for c in unicodedata.normalize("NFKC", name) if (s := _script(c)) is not None}
    if not _one_script(scripts):
        msg = (
            f"a tenant name's letters come from one script; {name!r} mixes "
            f"{', '.join(sorted(scripts))} (a letter of one can pass for another's)"
        )
        raise InvalidTenantNameError(msg)
    try:
        UUID(name)
    except ValueError:
        return name
    msg = f"{name!r} reads as a tenant id; choose a name that is not a UUID"
    raise InvalidTenantNameError(msg)


def colliding_names(names: Iterable[tuple[UUID, str]]) -> list[list[UUID]]:
    """Return the groups of tenants (ids, each group sorted) whose names compare equal
    under :func:`tenant_name_key`: what a store recorded before names were compared so."""
    groups: dict[str, list[UUID]] = defaultdict(list)
    for tenant_id, name in names:
        groups[tenant_name_key(name)].append(tenant_id)
    return sorted(sorted(ids, key=str) for ids in groups.values() if len(ids) > 1)


def principal_id_for(tenant_id: UUID, name: str) -> UUID:
    """Return the stable id of the principal called ``name`` in a tenant."""
    return uuid5(tenant_id, f"principal:{name}")


class Tenant(Aggregate):
    """An isolated account. Tokens are recorded by digest, never in clear."""

    TOPIC = "palimpsest:Tenant"

    class Created(Aggregate.Created):
        """A tenant was created (``TenantCreated``)."""

        TOPIC = "palimpsest:TenantCreated"
        name: str
        principal_id: UUID

    class PrincipalRegistered(Aggregate.Event):
        """A named principal (agent, person, operator, judge) joined the tenant."""

        TOPIC = "palimpsest:PrincipalRegistered"
        registered_id: UUID
        name: str
        principal_id: UUID

    class TokenIssued(Aggregate.Event):
        """A bearer token was issued to a principal with a role."""

        TOPIC = "palimpsest:TokenIssued"
        token_id: UUID
        holder_id: UUID
        role: str
        token_digest: str
        principal_id: UUID

    class TokenRevoked(Aggregate.Event):
        """A token was revoked (``TokenRevoked``): it no longer authenticates."""

        TOPIC = "palimpsest:TokenRevoked"
        token_id: UUID
        token_digest: str
        principal_id: UUID

    class RetentionSet(Aggregate.Event):
        """The tenant set its retention of observation bytes (``RetentionSet``), in hours.

        New captures take it from now on; a shortening also applies to deadlines
        not yet passed (the retention drain records each). A lengthening never
        extends a deadline already set."""

        TOPIC = "palimpsest:RetentionSet"
        raw_hours: int
        transient_hours: int
        principal_id: UUID

    class DeletionRequested(Aggregate.Event):
        """An administrator asked for the whole tenant to be erased
        (``TenantDeletionRequested``), by a decision. From this event on the tenant
        is closed: only the erasure receipt can be read."""

        TOPIC = "palimpsest:TenantDeletionRequested"
        decision_id: UUID
        principal_id: UUID

    class Deleted(Aggregate.Event):
        """Every observation and memory of the tenant is erased (``TenantDeleted``):
        the deletion's receipt is complete."""

        TOPIC = "palimpsest:TenantDeleted"
        decision_id: UUID
        principal_id: UUID

    class JudgmentSet(Aggregate.Event):
        """An administrator opted the tenant in or out of the forgetting pass, and set
        its daily budget of judge calls and tokens (``JudgmentPolicySet``)."""

        TOPIC = "palimpsest:JudgmentPolicySet"
        enabled: bool
        daily_calls: int
        daily_tokens: int
        principal_id: UUID

    class ForgettingSet(Aggregate.Event):
        """An administrator set the tenant's forgetting policy (``ForgettingPolicySet``):
        every field of :class:`~palimpsest.domain.forgetting_policy.ForgettingPolicy`, validated."""

        TOPIC = "palimpsest:ForgettingPolicySet"
        policy: dict[str, Any]
        principal_id: UUID

    forgetting: dict[str, Any] | None = None
    """The forgetting policy's values once set (class default: older snapshots load)."""
    forgetting_version: int = 0
    """How many times the forgetting policy was set."""
    deletion: UUID | None = None
    """The deletion decision once requested (class default: older snapshots load)."""
    judgment: tuple[bool, int, int] | None = None
    """(enabled, daily judge calls, daily judge tokens) once set; None: not opted in."""
    deleted: bool = False

    @event(Created)
    def __init__(self, id: UUID, name: str, principal_id: UUID) -> None:
        self.name = name
        self.founder_id = principal_id
        self.principals: dict[UUID, str] = {}
        self.token_digests: set[str] = set()
        self.tokens: dict[UUID, str] = {}
        """The digest of each token that authenticates, by token id."""
        self.revoked_tokens: set[UUID] = set()
        self.retention: tuple[int, int] | None = None

    @classmethod
    def create(cls, tenant_id: UUID, name: str, admin_name: str) -> Tenant:
        """Create a tenant and register its first principal, who caused it."""
        tenant = cls(id=tenant_id, name=name, principal_id=principal_id_for(tenant_id, admin_name))
        tenant.register_principal(admin_name, principal_id=principal_id_for(tenant_id, admin_name))
        return tenant

    def register_principal(self, name: str, *, principal_id: UUID) -> UUID:
        """Register ``name`` if new; return its id either way."""
        registered_id = principal_id_for(self.id, name)
        if registered_id not in self.principals:
            self._registered(registered_id=registered_id, name=name, principal_id=principal_id)
        return registered_id

    @event(PrincipalRegistered)
    def _registered(self, registered_id: UUID, name: str, principal_id: UUID) -> None:
        self.principals[registered_id] = name

    def issue_token(
        self, token_id: UUID, holder_id: UUID, role: str, token_digest: str, *, principal_id: UUID
    ) -> None:
        """Record a new token for a registered principal.

        Raises:
            InvalidInputError: the role is unknown or the holder is not registered.
        """
        if role not in ROLES:
            msg = f"unknown role {role!r}; expected one of {', '.join(ROLES)}"
            raise InvalidInputError(msg)
        if holder_id not in self.principals:
            msg = f"principal {holder_id} is not registered in tenant {self.id}"
            raise InvalidInputError(msg)
        self._issued(
            token_id=token_id,
            holder_id=holder_id,
            role=role,
            token_digest=token_digest,
            principal_id=principal_id,
        )

    @event(TokenIssued)
    def _issued(
        self, token_id: UUID, holder_id: UUID, role: str, token_digest: str, principal_id: UUID
    ) -> None:
        self.token_digests.add(token_digest)
        self.tokens[token_id] = token_digest

    def revoke_token(self, token_id: UUID, *, principal_id: UUID) -> str | None:
        """Revoke a token; return its digest (None, recording nothing, if it was
        revoked already).

        Raises:
            NotFoundError: the tenant never issued this token.
        """
        if token_id in self.revoked_tokens:
            return None
        if token_id not in self.tokens:
            msg = f"token {token_id} not found in tenant {self.id}"
            raise NotFoundError(msg)
        digest = self.tokens[token_id]
        self._revoked(token_id=token_id, token_digest=digest, principal_id=principal_id)
        return digest

    @event(TokenRevoked)
    def _revoked(self, token_id: UUID, token_digest: str, principal_id: UUID) -> None:
        del self.tokens[token_id]
        self.revoked_tokens.add(token_id)

    def set_retention(
        self,
        *,
        raw_hours: int,
        transient_hours: int,
        max_raw_hours: int,
        max_transient_hours: int,
        principal_id: UUID,
    ) -> None:
        """Set the tenant's retention, within the deployment's maxima.

        Raises:
            InvalidInputError: a value below one hour or above the deployment's maximum.
        """
        for what, value, maximum in (
            ("raw", raw_hours, max_raw_hours),
            ("transient", transient_hours, max_transient_hours),
        ):
            if not 1 <= value <= maximum:
                msg = f"{what} retention must be between 1 and {maximum} hours, got {value}"
                raise InvalidInputError(msg)
        self._retention_set(
            raw_hours=raw_hours, transient_hours=transient_hours, principal_id=principal_id
        )

    @event(RetentionSet)
    def _retention_set(self, raw_hours: int, transient_hours: int, principal_id: UUID) -> None:
        self.retention = (raw_hours, transient_hours)

    def set_judgment(
        self, *, enabled: bool, daily_calls: int, daily_tokens: int, principal_id: UUID
    ) -> None:
        """Opt the tenant in or out of the forgetting pass, with its daily budget.

        Raises:
            InvalidInputError: a budget below zero or above the limits
                (:data:`MAX_DAILY_JUDGE_CALLS`, :data:`MAX_DAILY_JUDGE_TOKENS`).
        """
        if not 0 <= daily_calls <= MAX_DAILY_JUDGE_CALLS:
            msg = f"daily_calls must be between 0 and {MAX_DAILY_JUDGE_CALLS}, got {daily_calls}"
            raise InvalidInputError(msg)
        if not 0 <= daily_tokens <= MAX_DAILY_JUDGE_TOKENS:
            msg = f"daily_tokens must be between 0 and {MAX_DAILY_JUDGE_TOKENS}, got {daily_tokens}"
            raise InvalidInputError(msg)
        self._judgment_set(
            enabled=enabled,
            daily_calls=daily_calls,
            daily_tokens=daily_tokens,
            principal_id=principal_id,
        )

    @event(JudgmentSet)
    def _judgment_set(
        self, enabled: bool, daily_calls: int, daily_tokens: int, principal_id: UUID
    ) -> None:
        self.judgment = (enabled, daily_calls, daily_tokens)

    def forgetting_policy(self) -> ForgettingPolicy:
        """Return the tenant's forgetting policy (the defaults until one is set)."""
        if self.forgetting is None:
            return DEFAULT_POLICY
        return ForgettingPolicy.checked(self.forgetting, version=self.forgetting_version)

    def set_forgetting(self, values: dict[str, Any], *, principal_id: UUID) -> ForgettingPolicy:
        """Set the forgetting policy: the defaults overridden by ``values`` (fields not
        given take their defaults, not the previous policy's). Returns it, versioned.

        Raises:
            InvalidInputError: see :meth:`ForgettingPolicy.checked`.
        """
        policy = ForgettingPolicy.checked(values, version=self.forgetting_version + 1)
        self._forgetting_set(policy=policy.as_values(), principal_id=principal_id)
        return policy

    @event(ForgettingSet)
    def _forgetting_set(self, policy: dict[str, Any], principal_id: UUID) -> None:
        self.forgetting = policy
        self.forgetting_version = self.forgetting_version + 1

    def request_deletion(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Close the tenant for erasure. Returns False (and records nothing) if a
        deletion was requested already."""
        if self.deletion is not None:
            return False
        self._deletion_requested(decision_id=decision_id, principal_id=principal_id)
        return True

    @event(DeletionRequested)
    def _deletion_requested(self, decision_id: UUID, principal_id: UUID) -> None:
        self.deletion = decision_id

    def complete_deletion(self, *, principal_id: UUID) -> None:
        """Record that the requested deletion has erased everything.

        Raises:
            InvalidInputError: no deletion was requested, or it is complete already.
        """
        if self.deletion is None or self.deleted:
            msg = f"tenant {self.id} has no deletion in progress"
            raise InvalidInputError(msg)
        self._deleted(decision_id=self.deletion, principal_id=principal_id)

    @event(Deleted)
    def _deleted(self, decision_id: UUID, principal_id: UUID) -> None:
        self.deleted = True
