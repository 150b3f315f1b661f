"""Errors raised by palimpsest.

Every exception palimpsest defines descends from :class:`PalimpsestError`::

    PalimpsestError
    ├── InvalidInputError            bad input that passed schema validation
    │   ├── ContentTooLargeError
    │   ├── EvidenceOutOfRangeError
    │   ├── EvidenceRetractedError   citing an observation retracted as evidence
    │   ├── EvidenceErasedError      citing an erased observation
    │   ├── EdgeNotAllowedError
    │   └── InconsistentPolicyError  a forgetting policy whose fields contradict each other
    ├── NotFoundError                unknown id, or an id of another tenant
    ├── ContentExpiredError          content deleted (or due) at its retention deadline
    ├── ContentErasedError           content removed by an erasure
    ├── TenantClosedError            the tenant is being (or was) deleted
    ├── ConfirmationRequiredError    a destructive request without its confirmation
    ├── ConflictError
    │   ├── IdempotencyKeyReusedError
    │   ├── EdgeExistsError
    │   ├── StructurallyArchivedError  restore asked of a superseded memory
    │   ├── MemoryForgottenError       a write that needs a memory not forgotten
    │   ├── MemorySupersededError      a write that needs a memory not superseded
    │   ├── ItemsChangedError          verdicts by ref against a listing that moved on
    │   └── AlreadySettledError        a potential conflict settled already
    ├── AuthenticationError          missing, malformed or unknown token
    ├── PermissionDeniedError        the token's role may not do this
    └── ConfigurationError           a setting is missing or invalid

Persistence errors subclass these in ``projections/store/errors.py``.
"""

from __future__ import annotations

__all__ = [
    "AlreadySettledError",
    "AuthenticationError",
    "CollapseGuardError",
    "ConfigurationError",
    "ConfirmationRequiredError",
    "ConflictError",
    "ContentErasedError",
    "ContentExpiredError",
    "ContentTooLargeError",
    "EdgeExistsError",
    "EdgeNotAllowedError",
    "EvidenceErasedError",
    "EvidenceOutOfRangeError",
    "EvidenceRetractedError",
    "IdempotencyKeyReusedError",
    "InconsistentPolicyError",
    "InvalidInputError",
    "ItemsChangedError",
    "MemoryForgottenError",
    "MemorySupersededError",
    "NotFoundError",
    "PalimpsestError",
    "PassDisabledError",
    "PermissionDeniedError",
    "ProposalClosedError",
    "StaleProposalError",
    "StructurallyArchivedError",
    "TenantClosedError",
]


class PalimpsestError(Exception):
    """Raised for any failure that palimpsest itself detects."""


class InvalidInputError(PalimpsestError):
    """Raised when a request is well-formed but its values break a rule."""


class ContentTooLargeError(InvalidInputError):
    """Raised when content exceeds the documented size limit."""


class EvidenceOutOfRangeError(InvalidInputError):
    """Raised when evidence offsets fall outside the observation's content."""


class EvidenceRetractedError(InvalidInputError):
    """Raised when evidence cites an observation that was retracted as evidence."""


class EvidenceErasedError(InvalidInputError):
    """Raised when evidence cites an observation that was erased."""


class EdgeNotAllowedError(InvalidInputError):
    """Raised when an edge kind is not allowed between two memories."""


class InconsistentPolicyError(InvalidInputError):
    """Raised when a forgetting policy's values are each valid but contradict each other
    (``prune_below`` above ``fade_below``)."""


class NotFoundError(PalimpsestError):
    """Raised when an id is unknown to the caller's tenant."""


class ContentExpiredError(PalimpsestError):
    """Raised when content is read at or after its retention deadline."""


class ContentErasedError(PalimpsestError):
    """Raised when content removed by an erasure is read; names the erasure."""

    def __init__(self, message: str, erasure_id: object) -> None:
        super().__init__(message)
        self.erasure_id = erasure_id


class TenantClosedError(PalimpsestError):
    """Raised when a deleted (or deleting) tenant is used for anything but its receipt."""

    def __init__(self, message: str, erasure_id: object) -> None:
        super().__init__(message)
        self.erasure_id = erasure_id


class ConfirmationRequiredError(PalimpsestError):
    """Raised when a destructive request lacks (or has a stale) confirmation token;
    carries the token that would confirm it now."""

    def __init__(self, message: str, token: str) -> None:
        super().__init__(message)
        self.token = token


class ConflictError(PalimpsestError):
    """Raised when a request conflicts with what is already recorded."""


class IdempotencyKeyReusedError(ConflictError):
    """Raised when an Idempotency-Key is reused with a different request."""


class EdgeExistsError(ConflictError):
    """Raised when the same edge between two memories is added twice."""


class StructurallyArchivedError(ConflictError):
    """Raised when ``restore`` is asked of a memory archived by an edge (superseded),
    not by a forget: retracting the edge is what ends that archival."""


class MemoryForgottenError(ConflictError):
    """Raised when a memory that was forgotten is revised or settled without being
    restored first (``restore: true`` restores and revises in one write)."""


class MemorySupersededError(ConflictError):
    """Raised when a memory that another memory supersedes is revised or settled
    without being restored first (``restore: true`` retracts the edges and revises)."""


class AlreadySettledError(ConflictError):
    """Raised when a potential conflict between two memories is settled again
    differently: one supersedes the other, or both were recorded as standing."""


class StaleProposalError(ConflictError):
    """Raised when a proposal is applied whose memories changed since the judge saw
    them (another version, archived, or erased), or whose effect would archive a
    pinned memory."""


class CollapseGuardError(ConflictError):
    """Raised when a write that archives memories by proposal or automatically would
    pass the tenant's daily allowance (the collapse guard), unconfirmed by an
    administrator."""


class ItemsChangedError(ConflictError):
    """Raised when verdicts name items by ref and the items to judge changed since the
    listing they were read from (its ``items_digest``)."""


class PassDisabledError(ConflictError):
    """Raised when a forgetting pass is asked of a deployment that runs none: the pass
    is off, or no judge is configured (there is no fallback)."""


class ProposalClosedError(ConflictError):
    """Raised when a proposal that is not open (dismissed, applied or rejected) is
    applied or rejected."""


class AuthenticationError(PalimpsestError):
    """Raised when a request carries no valid bearer token."""


class PermissionDeniedError(PalimpsestError):
    """Raised when the caller's role does not allow the operation."""


class ConfigurationError(PalimpsestError):
    """Raised when a setting is missing or has an invalid value."""
