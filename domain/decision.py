"""The ``Decision`` aggregate: one recorded judgment that changed labels.

Every operation that changes labels on someone's behalf (an operator's
edge or its retraction, a support withdrawal, a forget, a restore, a pin, an
erasure) is recorded as one decision: what it was asked to do and why (its
``reason``, when the caller gave one), the inputs it referred to, the versions
and content digests it saw, who proposed it, under which policy version,
and which operations it accepted or refused. The events that carry its
effects (``EdgeAdded``, ``ContributionDeactivated``, ``MemoryArchived`` …)
name the decision, and are recorded in the same transaction.

Replaying an identical logical decision (same kind, subject and
parameters) while its outcome still stands applies nothing and returns the
original outcome: see :func:`logical_key`. The reason is part of the logical
decision only where it is a parameter (forget, erasure, tenant deletion);
elsewhere a replay with another reason returns the original, with its reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, get_args
from uuid import UUID

from eventsourcing.domain import Aggregate, event

__all__ = [
    "DECISION_KINDS",
    "DISMISS_CONFLICT",
    "Decision",
    "DecisionKind",
    "DecisionParams",
    "POLICY_VERSION",
    "dismissal_key",
    "dismissal_subject",
    "logical_key",
]

DecisionKind = Literal[
    "add_edge",
    "retract_edge",
    "retract_observation",
    "withdraw_proposer",
    "forget",
    "restore",
    "pin",
    "unpin",
    "erasure",
    "tenant_deletion",
    "apply_proposal",
    "reject_proposal",
    "merge",
    "dismiss_conflict",
]
DECISION_KINDS: tuple[DecisionKind, ...] = get_args(DecisionKind)

DecisionParams: TypeAlias = dict[str, str | list[str]]
"""A decision's parameters: labels and ids, or lists of ids (an erasure's)."""

POLICY_VERSION = "palimpsest-policy/1"
"""The rules decisions are taken under; recorded with each so a later change is visible."""


def logical_key(kind: str, subject: str, params: Mapping[str, str | list[str]]) -> str:
    """Return the identity of a logical decision: its kind, subject and parameters.

    Two requests with the same key ask for the same thing. Who asked, when,
    and what the store held at the time are not part of it.
    """
    canonical = json.dumps(
        {"kind": kind, "subject": subject, "params": dict(sorted(params.items()))},
        sort_keys=True,
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


DISMISS_CONFLICT: DecisionKind = "dismiss_conflict"
"""The kind of a decision that two memories flagged as a potential conflict both
stand: neither supersedes the other. It changes no label (no event but its own
``DecisionRecorded``); recall reads it to stop marking the pair."""


def dismissal_subject(a: UUID, b: UUID) -> str:
    """Return the subject of a ``dismiss_conflict`` decision about memories ``a`` and
    ``b``: the same whichever is named first (``memories:<lower id>,<higher id>``,
    ids compared as text), so the pair has one logical decision."""
    low, high = sorted((str(a), str(b)))
    return f"memories:{low},{high}"


def dismissal_key(a: UUID, b: UUID) -> str:
    """Return the logical key of the ``dismiss_conflict`` decision about ``a`` and ``b``
    (either order): what ``decision_index.logical_key`` holds once it is recorded."""
    return logical_key(DISMISS_CONFLICT, dismissal_subject(a, b), {})


class Decision(Aggregate):
    """A judgment and its outcome. Never changes once recorded."""

    TOPIC = "palimpsest:Decision"

    class Created(Aggregate.Created):
        """A decision was taken (``DecisionRecorded``).

        ``inputs`` are references (``{"kind", "id"}``), ``seen`` the versions
        and content digests the decision looked at, ``accepted`` and
        ``refused`` the operations, each a flat mapping of ids (refusals
        carry a ``reason``). None of them carries claim text. ``reason`` is why the
        caller asked (None when it gave none; absent from decisions recorded before
        decisions kept it).
        """

        TOPIC = "palimpsest:DecisionRecorded"
        tenant_id: UUID
        kind: str
        subject: str
        params: DecisionParams
        logical_key: str
        inputs: list[dict[str, str]]
        seen: list[dict[str, str]]
        accepted: list[dict[str, str]]
        refused: list[dict[str, str]]
        proposer_id: UUID
        policy_version: str
        principal_id: UUID
        reason: str | None = None

    @event(Created)
    def __init__(
        self,
        id: UUID,
        tenant_id: UUID,
        kind: str,
        subject: str,
        params: DecisionParams,
        logical_key: str,
        inputs: list[dict[str, str]],
        seen: list[dict[str, str]],
        accepted: list[dict[str, str]],
        refused: list[dict[str, str]],
        proposer_id: UUID,
        policy_version: str,
        principal_id: UUID,
        reason: str | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.kind = kind
        self.subject = subject
        self.params = params
        self.logical_key = logical_key
        self.inputs = inputs
        self.seen = seen
        self.accepted = accepted
        self.refused = refused
        self.proposer_id = proposer_id
        self.policy_version = policy_version
        self.principal_id = principal_id
        self.reason = reason

    def outcome(self) -> dict[str, Any]:
        """Return what the decision did, as its API response states it."""
        return {
            "id": str(self.id),
            "kind": self.kind,
            "subject": self.subject,
            "params": dict(self.params),
            "reason": self.reason,
            "accepted": list(self.accepted),
            "refused": list(self.refused),
        }
