"""Aggregates: stable topics, strict events, deterministic replay, no content in events."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.application import Application
from eventsourcing.utils import get_topic

from palimpsest.domain.errors import EdgeExistsError, InvalidInputError
from palimpsest.domain.evidence import cut_excerpt
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.domain.tenant import Tenant

STABLE_TOPICS = {
    Memory.Created: "palimpsest:MemoryCreated",
    Memory.VersionRecorded: "palimpsest:VersionRecorded",
    Memory.ContributionAdded: "palimpsest:ContributionAdded",
    Memory.EdgeAdded: "palimpsest:EdgeAdded",
    Memory.ContributionDeactivated: "palimpsest:ContributionDeactivated",
    Observation.Expired: "palimpsest:ObservationExpired",
    Observation.Created: "palimpsest:ObservationCaptured",
    Tenant.Created: "palimpsest:TenantCreated",
    Tenant.PrincipalRegistered: "palimpsest:PrincipalRegistered",
    Tenant.TokenIssued: "palimpsest:TokenIssued",
}


@pytest.mark.parametrize(("cls", "topic"), STABLE_TOPICS.items())
def test_every_event_is_stored_under_its_stable_topic(cls: type, topic: str) -> None:
    assert get_topic(cls) == topic


def test_events_reject_unknown_fields() -> None:
    with pytest.raises(TypeError):
        Memory.EdgeAdded(
            originator_id=uuid4(),
            originator_version=2,  # type: ignore[call-arg]
            timestamp=Memory.EdgeAdded.create_timestamp(),
            edge_id=uuid4(),
            kind="extends",
            target_id=uuid4(),
            principal_id=uuid4(),
            text="x",
        )


def _memory(memory_type: str = "fact") -> Memory:
    return Memory.create(
        tenant_id=uuid4(),
        memory_type=memory_type,
        scope="user",
        project=None,
        topic=None,
        principal_id=uuid4(),
    )


def test_unknown_memory_types_and_out_of_range_trust_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        _memory("opinion")
    with pytest.raises(InvalidInputError):
        _memory().record_version(
            content_digest="sha256:0",
            size_bytes=1,
            excerpts=(),
            principal_id=uuid4(),
            model_id=None,
            trust=1.01,
        )


def test_a_second_identical_edge_is_refused() -> None:
    a, b = _memory(), _memory()
    a.add_edge("conflicts_with", b, principal_id=uuid4())
    with pytest.raises(EdgeExistsError):
        a.add_edge("conflicts_with", b, principal_id=uuid4())


def test_stored_events_carry_digests_never_content() -> None:
    app = Application[Any]()
    secret = "SENTINEL-claim-text-do-not-store"
    memory = _memory()
    memory.record_version(
        content_digest="sha256:abc",
        size_bytes=len(secret),
        excerpts=(cut_excerpt(uuid4(), secret, 0, 8),),
        principal_id=uuid4(),
        model_id=None,
        trust=1.0,
    )
    for event in memory.collect_events():
        state = app.mapper.to_stored_event(event).state
        assert secret.encode() not in state
        assert b"SENTINEL" not in state
        json.loads(state)  # the default transcoder: plain JSON, no pickles


def test_a_deactivated_contribution_stops_counting_and_cannot_be_deactivated_twice() -> None:
    from palimpsest.domain.belief import MemoryFacts, project_belief
    from palimpsest.domain.errors import ConflictError, NotFoundError

    memory = _memory()
    excerpt = cut_excerpt(uuid4(), "evidence text", 0, 8)
    memory.record_version(
        content_digest="sha256:a",
        size_bytes=1,
        excerpts=(excerpt,),
        principal_id=uuid4(),
        model_id="judge-1.4",
        trust=1.0,
    )
    [contribution] = memory.contributions
    decision = uuid4()
    memory.deactivate_contribution(
        contribution.contribution_id, decision_id=decision, principal_id=uuid4()
    )
    facts = MemoryFacts(
        memory.id,
        "fact",
        "user",
        None,
        None,
        tuple(v.version_id for v in memory.versions),
        tuple(memory.contributions),
    )
    assert project_belief(facts).grade == "unsupported"
    with pytest.raises(ConflictError):
        memory.deactivate_contribution(
            contribution.contribution_id, decision_id=decision, principal_id=uuid4()
        )
    with pytest.raises(NotFoundError):
        memory.deactivate_contribution(uuid4(), decision_id=decision, principal_id=uuid4())
