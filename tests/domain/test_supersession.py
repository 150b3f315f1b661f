"""Supersession archives structurally; retracting the edge (a decision) undoes it;
contributions add support to an existing version (issue 12, items 1 and 4)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.application import Application
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.domain.belief import ArchiveFact, EdgeFact, MemoryFacts, project_belief
from palimpsest.domain.errors import ConflictError, InvalidInputError, NotFoundError
from palimpsest.domain.evidence import cut_excerpt
from palimpsest.domain.memory import Memory

ME, NEW, OTHER = UUID(int=1), UUID(int=2), UUID(int=3)
V1 = UUID(int=11)


def _facts(*edges: EdgeFact, retracted: frozenset[UUID] = frozenset(), **more: Any) -> MemoryFacts:
    return MemoryFacts(
        ME, "fact", "user", None, None, (V1,), (), edges, retracted_edges=retracted, **more
    )


def _edge(kind: str, source: UUID, target: UUID, position: int = 1) -> EdgeFact:
    return EdgeFact(uuid4(), kind, source, target, position)


def test_the_target_of_a_supersedes_edge_is_archived_structurally() -> None:
    edge = _edge("supersedes", NEW, ME)
    belief = project_belief(_facts(edge))
    assert belief.archived is not None and belief.archived.structural
    assert (belief.archived.reason, belief.archived.superseded_by) == ("superseded", NEW)
    assert belief.archived.edge_id == edge.edge_id and belief.archived.decision_id is None
    codes = {r.code: r.as_dict() for r in belief.reasons}
    assert codes["archived_structurally"] == {
        "code": "archived_structurally",
        "reason": "superseded",
        "by": str(NEW),
        "edge_id": str(edge.edge_id),
    }
    # The source, and memories joined by other kinds of edges, are not archived.
    for other in (_edge("supersedes", ME, OTHER), _edge("extends", NEW, ME)):
        assert project_belief(_facts(other)).archived is None


def test_the_losing_side_of_a_resolved_conflict_is_archived_and_the_winner_is_not() -> None:
    conflict, wins = _edge("conflicts_with", ME, OTHER, 1), _edge("supersedes", OTHER, ME, 2)
    loser = project_belief(_facts(conflict, wins))
    assert loser.grade != "contested" and loser.archived is not None
    assert loser.archived.superseded_by == OTHER
    winner = project_belief(_facts(conflict, _edge("supersedes", ME, OTHER, 2)))
    assert winner.archived is None and winner.grade != "contested"


def test_a_retracted_edge_no_longer_archives_or_resolves() -> None:
    conflict, wins = _edge("conflicts_with", ME, OTHER, 1), _edge("supersedes", OTHER, ME, 2)
    belief = project_belief(_facts(conflict, wins, retracted=frozenset({wins.edge_id})))
    assert belief.archived is None and belief.superseded_by == ()
    assert belief.grade == "contested"  # the conflict is open again


def test_the_earliest_live_supersession_names_the_archival_and_a_forget_comes_first() -> None:
    first, second = _edge("supersedes", NEW, ME, 1), _edge("supersedes", OTHER, ME, 2)
    belief = project_belief(_facts(second, first))
    assert belief.archived is not None and belief.archived.superseded_by == NEW
    belief = project_belief(_facts(second, first, retracted=frozenset({first.edge_id})))
    assert belief.archived is not None and belief.archived.superseded_by == OTHER
    forget = ArchiveFact("duplicate", UUID(int=9))
    both = project_belief(_facts(first, archived=forget))
    assert both.archived is not None and not both.archived.structural
    assert both.archived.reason == "duplicate"
    assert {"archived", "archived_structurally"} <= {r.code for r in both.reasons}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["supersedes", "conflicts_with", "extends"]),
            st.sampled_from([NEW, OTHER]),
            st.booleans(),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_archived_structurally_exactly_when_a_live_supersedes_edge_points_at_it(
    spec: list[tuple[str, UUID, bool, bool]],
) -> None:
    edges = [
        _edge(kind, other if incoming else ME, ME if incoming else other, i)
        for i, (kind, other, incoming, _) in enumerate(spec)
    ]
    retracted = frozenset(e.edge_id for e, (*_, gone) in zip(edges, spec, strict=True) if gone)
    belief = project_belief(_facts(*edges, retracted=retracted))
    live = [e for e in edges if e.edge_id not in retracted]
    superseding = [e for e in live if e.kind == "supersedes" and e.target_id == ME]
    assert (belief.archived is not None) == bool(superseding)
    assert set(belief.superseded_by) == {e.source_id for e in superseding}


def _memory(memory_type: str = "fact") -> Memory:
    return Memory.create(
        tenant_id=uuid4(),
        memory_type=memory_type,
        scope="user",
        project=None,
        topic=None,
        principal_id=uuid4(),
    )


def test_retracting_an_edge_records_it_on_both_memories_and_replays() -> None:
    app = Application[Any]()
    old, new, principal = _memory(), _memory(), uuid4()
    edge_id = new.add_edge("supersedes", old, principal_id=principal)
    assert new.edge(edge_id) == ("supersedes", old.id)
    decision = uuid4()
    for memory in (new, old):
        assert memory.retract_edge(edge_id, decision_id=decision, principal_id=principal)
        assert not memory.retract_edge(edge_id, decision_id=decision, principal_id=principal)
    assert new.edge(edge_id) is None and not new.has_edge("supersedes", old.id)
    again = new.add_edge("supersedes", old, principal_id=principal)  # a new edge
    assert again != edge_id
    app.save(*new.collect_events(), *old.collect_events())
    for memory in (new, old):
        replayed: Memory = app.repository.get(memory.id)
        assert list(replayed.retracted_edges) == [edge_id]
        assert replayed.edges == memory.edges


def test_contributions_support_an_existing_version_and_are_checked() -> None:
    memory, writer, helper = _memory(), uuid4(), uuid4()
    first = cut_excerpt(uuid4(), "evidence text", 0, 8)
    version = memory.record_version(
        content_digest="sha256:a",
        size_bytes=1,
        excerpts=(first,),
        principal_id=writer,
        model_id=None,
        trust=1.0,
    )
    second = cut_excerpt(uuid4(), "more evidence", 0, 4)
    [added] = memory.add_contributions(
        version, (second,), principal_id=helper, model_id="judge-2", trust=0.5
    )
    contribution = memory.contributions[-1]
    assert contribution.contribution_id == added
    assert (contribution.proposer_id, contribution.version_id) == (helper, version)
    with pytest.raises(ConflictError):  # the same source, by the same proposer, again
        memory.add_contributions(version, (second,), principal_id=helper, model_id=None, trust=1)
    with pytest.raises(NotFoundError):
        memory.add_contributions(uuid4(), (second,), principal_id=helper, model_id=None, trust=1)
    with pytest.raises(InvalidInputError):
        memory.add_contributions(version, (), principal_id=helper, model_id=None, trust=1)
    with pytest.raises(InvalidInputError):
        memory.add_contributions(version, (first,), principal_id=helper, model_id=None, trust=2)
    # Withdrawing the helper's support leaves the writer's standing.
    memory.deactivate_contribution(added, decision_id=uuid4(), principal_id=uuid4())
    facts = MemoryFacts(
        memory.id, "fact", "user", None, None, (version,), tuple(memory.contributions)
    )
    assert project_belief(facts).grade == "supported"
    # And the helper may support it again once theirs was withdrawn.
    memory.add_contributions(version, (second,), principal_id=helper, model_id=None, trust=1)
