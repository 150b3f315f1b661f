"""A merge proposal's text is erased once, by an erasure, and replay agrees."""

from __future__ import annotations

from uuid import uuid4

from palimpsest.domain.proposal import Proposal


def _proposal(action: str, content_digest: str | None) -> Proposal:
    return Proposal.propose(
        id=uuid4(),
        tenant_id=uuid4(),
        memory_id=uuid4(),
        action=action,
        related_memory_id=None,
        probability=0.95,
        distribution=None,
        model="extractive",
        run_id=uuid4(),
        seen=[],
        policy_version="p",
        dismissed=False,
        content_digest=content_digest,
    )


def _replayed(proposal: Proposal) -> Proposal:
    events = proposal.collect_events()
    replayed = None
    for event in events:
        replayed = event.mutate(replayed)
    assert isinstance(replayed, Proposal)
    return replayed


def test_a_merge_text_is_erased_once_and_replay_agrees() -> None:
    proposal = _proposal("merge", "sha256:merged")
    decision = uuid4()
    assert proposal.erase_text(decision_id=decision, principal_id=uuid4())
    assert not proposal.erase_text(decision_id=uuid4(), principal_id=uuid4())
    [erased] = [e for e in proposal.pending_events if isinstance(e, Proposal.TextErased)]
    assert erased.content_digest == "sha256:merged" and erased.decision_id == decision
    assert _replayed(proposal).text_erased_by == decision


def test_a_proposal_without_text_has_none_to_erase() -> None:
    proposal = _proposal("archive", None)
    assert not proposal.erase_text(decision_id=uuid4(), principal_id=uuid4())
    assert proposal.text_erased_by is None
    assert all(not isinstance(e, Proposal.TextErased) for e in proposal.pending_events)
