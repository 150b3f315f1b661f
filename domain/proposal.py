"""The ``Proposal`` aggregate: a judge's verdict about a memory, waiting for a person.

The forgetting pass (seed 000) asks a judge about stale memories and likely
conflicting pairs; each verdict becomes a proposal
(``RetentionProposed``): what the judge proposes for the memory (keep,
archive, supersede or conflict), the related memory for supersede (the
newer one) and conflict (the other side), the judge's probability for its
choice and its whole distribution (for calibration), the model, the run,
the versions and content digests it saw, and the policy version.

Consolidation proposes ``merge``: fold the memories it saw (``seen``, the
centre as ``memory_id``) into one new memory with the text under
``content_digest``. An erasure that removes content of any of them erases that
text (``MergeTextErased``), whatever the proposal's status.

A proposal the pass does not want a person to see (a keep verdict, or one
below its action's threshold) is recorded ``dismissed``: kept for
calibration, and so the pass does not ask again about a memory whose
freshness has not moved, but never listed by default. An open
(``proposed``) one ends once, by a person: ``applied`` (its effect is a
decision recorded in the same write) or ``rejected`` (final for that memory
and action until the memory's freshness moves). Only the pass dismisses;
a reviewer's no is a rejection, so calibration can tell them apart.
"""

from __future__ import annotations

from typing import Literal, get_args
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from palimpsest.domain.errors import InvalidInputError, ProposalClosedError

__all__ = [
    "DEFAULT_THRESHOLDS",
    "PROPOSAL_ACTIONS",
    "PROPOSAL_STATUSES",
    "Proposal",
    "ProposalAction",
    "ProposalStatus",
    "dismissed",
]

ProposalAction = Literal["keep", "archive", "supersede", "conflict", "merge", "decay"]
PROPOSAL_ACTIONS: tuple[ProposalAction, ...] = get_args(ProposalAction)

ProposalStatus = Literal["proposed", "applied", "rejected", "dismissed"]
PROPOSAL_STATUSES: tuple[ProposalStatus, ...] = get_args(ProposalStatus)


DEFAULT_THRESHOLDS: dict[str, float] = {"archive": 0.9, "supersede": 0.8, "conflict": 0.7}
"""The least probability at which a verdict is shown to a person, per action. A wrong
archive costs more than a missed one, so archive asks for the most. Placeholders: the
dev-split evaluation of the one model that runs here found no meaningful threshold
(docs/judge.md#thresholds)."""


def dismissed(action: str, probability: float | None, thresholds: dict[str, float]) -> bool:
    """Return whether a verdict is recorded ``dismissed`` (never listed by default): a
    keep; a verdict without a probability (its judge gave none); one below its action's
    threshold; or an action with no threshold configured."""
    if action == "keep" or probability is None or action not in thresholds:
        return True
    return probability < thresholds[action]


class Proposal(Aggregate):
    """A verdict about one memory, and what a person decided about it."""

    TOPIC = "palimpsest:RetentionProposal"

    content_digest: str | None = None
    """A merge's consolidated text. A class default, so older snapshots still load."""
    text_erased_by: UUID | None = None
    """The erasure that deleted a merge's text (a source lost content). A class
    default, so older snapshots still load."""

    class Created(Aggregate.Created):
        """A judge's verdict became a proposal (``RetentionProposed``).

        ``probability`` is the judge's for ``action`` (None when the judge
        gave no distribution: such a proposal never passes a threshold);
        ``distribution`` maps each action to its probability. ``seen`` lists,
        for each memory the judge saw, ``{memory_id, version_id, content_digest}``.
        """

        TOPIC = "palimpsest:RetentionProposed"
        tenant_id: UUID
        memory_id: UUID
        action: str
        related_memory_id: UUID | None
        probability: float | None
        distribution: dict[str, float] | None
        model: str
        run_id: UUID
        seen: list[dict[str, str]]
        policy_version: str
        status: str
        note: str | None
        content_digest: str | None = None
        """A merge's consolidated text (in the payload store); None for other actions."""

    class Decided(Aggregate.Event):
        """A person applied or rejected the proposal, by a recorded decision."""

        TOPIC = "palimpsest:RetentionProposalDecided"
        status: str
        decision_id: UUID
        principal_id: UUID
        effect: str | None = None
        """What applying it did to a memory: ``archive`` (forgot one), ``supersede``
        (an edge archived one), ``merge`` (a consolidated memory superseded them), or
        None (a rejection, or a conflict only reviewed)."""

    class TextErased(Aggregate.Event):
        """A merge's text was erased (``MergeTextErased``) because an erasure removed
        content of a memory it was drawn from: a model's text may repeat or
        paraphrase what was erased. The proposal is never served with text again."""

        TOPIC = "palimpsest:MergeTextErased"
        content_digest: str
        decision_id: UUID
        principal_id: UUID

    @event(Created)
    def __init__(
        self,
        id: UUID,
        tenant_id: UUID,
        memory_id: UUID,
        action: str,
        related_memory_id: UUID | None,
        probability: float | None,
        distribution: dict[str, float] | None,
        model: str,
        run_id: UUID,
        seen: list[dict[str, str]],
        policy_version: str,
        status: str,
        note: str | None,
        content_digest: str | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.memory_id = memory_id
        self.action = action
        self.related_memory_id = related_memory_id
        self.probability = probability
        self.distribution = distribution
        self.model = model
        self.run_id = run_id
        self.seen = seen
        self.policy_version = policy_version
        self.status = status
        self.note = note
        self.content_digest = content_digest
        self.decision_id: UUID | None = None
        self.effect: str | None = None

    @classmethod
    def propose(
        cls,
        *,
        id: UUID,
        tenant_id: UUID,
        memory_id: UUID,
        action: str,
        related_memory_id: UUID | None,
        probability: float | None,
        distribution: dict[str, float] | None,
        model: str,
        run_id: UUID,
        seen: list[dict[str, str]],
        policy_version: str,
        dismissed: bool,
        note: str | None = None,
        content_digest: str | None = None,
    ) -> Proposal:
        """Return a new proposal (``dismissed`` ones are recorded, never listed).

        Raises:
            InvalidInputError: an unknown action; a related memory missing for
                supersede or conflict, or given for keep or archive, or the
                memory itself; a probability outside [0, 1]; a keep that is
                not dismissed (a keep stays silent).
        """
        if action not in PROPOSAL_ACTIONS:
            msg = f"unknown action {action!r} (one of {', '.join(PROPOSAL_ACTIONS)})"
            raise InvalidInputError(msg)
        relates = action in ("supersede", "conflict")
        if relates != (related_memory_id is not None):
            msg = f"a {action} proposal {'needs a' if relates else 'takes no'} related memory"
            raise InvalidInputError(msg)
        if related_memory_id == memory_id:
            msg = "a proposal relates a memory to another one, not to itself"
            raise InvalidInputError(msg)
        if probability is not None and not 0.0 <= probability <= 1.0:
            msg = f"probability {probability} is outside [0, 1]"
            raise InvalidInputError(msg)
        if action == "keep" and not dismissed:
            msg = "a keep verdict is dismissed: it proposes nothing to a person"
            raise InvalidInputError(msg)
        if (action == "merge") != (content_digest is not None):
            msg = f"a {action} proposal {'needs' if action == 'merge' else 'takes no'} merged text"
            raise InvalidInputError(msg)
        return cls(
            id=id,
            tenant_id=tenant_id,
            memory_id=memory_id,
            action=action,
            related_memory_id=related_memory_id,
            probability=probability,
            distribution=distribution,
            model=model,
            run_id=run_id,
            seen=seen,
            policy_version=policy_version,
            status="dismissed" if dismissed else "proposed",
            note=note,
            content_digest=content_digest,
        )

    def decide(
        self,
        status: Literal["applied", "rejected"],
        *,
        decision_id: UUID,
        principal_id: UUID,
        effect: Literal["archive", "supersede", "merge"] | None = None,
    ) -> None:
        """Record that a person applied (with its ``effect``) or rejected the proposal.

        Raises:
            ProposalClosedError: it is not open (dismissed, or decided already).
        """
        if self.status != "proposed":
            msg = f"proposal {self.id} is {self.status}, not open"
            raise ProposalClosedError(msg)
        self._decided(
            status=status, decision_id=decision_id, principal_id=principal_id, effect=effect
        )

    @event(Decided)
    def _decided(
        self, status: str, decision_id: UUID, principal_id: UUID, effect: str | None
    ) -> None:
        self.status = status
        self.decision_id = decision_id
        self.effect = effect

    def erase_text(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Erase a merge's text, by an erasure. Returns False (and records nothing) if
        the proposal has no text, or its text is erased already."""
        if self.content_digest is None or self.text_erased_by is not None:
            return False
        self._text_erased(
            content_digest=self.content_digest, decision_id=decision_id, principal_id=principal_id
        )
        return True

    @event(TextErased)
    def _text_erased(self, content_digest: str, decision_id: UUID, principal_id: UUID) -> None:
        self.text_erased_by = decision_id
