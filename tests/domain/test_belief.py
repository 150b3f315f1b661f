"""The projection function: grades, labels and reasons, and that input order never matters."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.belief import ContributionFact, EdgeFact, MemoryFacts, project_belief

ME = UUID(int=1)
V1, V2 = UUID(int=11), UUID(int=12)
A, B = UUID(int=2), UUID(int=3)
OBS = [UUID(int=100 + i) for i in range(4)]


def _facts(
    *,
    contributions: tuple[ContributionFact, ...] = (),
    edges: tuple[EdgeFact, ...] = (),
    versions: tuple[UUID, ...] = (V1,),
) -> MemoryFacts:
    return MemoryFacts(ME, "fact", "user", "apollo", None, versions, contributions, edges)


def _support(
    observation: UUID, *, version: UUID = V1, active: bool = True, trust: float = 1.0
) -> ContributionFact:
    return ContributionFact(uuid4(), version, observation, UUID(int=50), None, trust, active)


def _edge(kind: str, source: UUID, target: UUID, position: int = 1) -> EdgeFact:
    return EdgeFact(uuid4(), kind, source, target, position)


@pytest.mark.parametrize(
    ("observations", "grade"),
    [
        ([], "unsupported"),
        ([OBS[0]], "supported"),
        ([OBS[0], OBS[0]], "supported"),
        ([OBS[0], OBS[1]], "corroborated"),
        ([OBS[0], OBS[1], OBS[2]], "corroborated"),
    ],
)
def test_grade_counts_distinct_observations_supporting_the_current_version(
    observations: list[UUID], grade: str
) -> None:
    belief = project_belief(_facts(contributions=tuple(_support(o) for o in observations)))
    assert belief.grade == grade


def test_support_for_older_versions_inactive_or_zero_trust_does_not_count() -> None:
    facts = _facts(
        versions=(V1, V2),
        contributions=(
            _support(OBS[0], version=V1),
            _support(OBS[1], active=False, version=V2),
            _support(OBS[2], trust=0.0, version=V2),
            _support(OBS[3], version=V2),
        ),
    )
    belief = project_belief(facts)
    assert belief.current_version_id == V2
    assert belief.grade == "supported"
    assert len(belief.support) == 1
    assert "support_inactive" in {r.code for r in belief.reasons}


def test_an_open_conflict_in_either_direction_makes_a_memory_contested() -> None:
    for edge in (_edge("conflicts_with", ME, A), _edge("conflicts_with", A, ME)):
        belief = project_belief(
            _facts(contributions=(_support(OBS[0]), _support(OBS[1])), edges=(edge,))
        )
        assert belief.grade == "contested"
        assert belief.alternatives == (A,)


def test_a_conflict_is_resolved_once_either_side_supersedes_the_other() -> None:
    for resolution in (_edge("supersedes", ME, A, 2), _edge("supersedes", A, ME, 2)):
        belief = project_belief(
            _facts(
                contributions=(_support(OBS[0]),),
                edges=(_edge("conflicts_with", ME, A), resolution),
            )
        )
        assert belief.grade == "supported"
        assert belief.alternatives == ()
        assert "conflict_resolved" in {r.code for r in belief.reasons}


def test_an_incoming_supersedes_edge_labels_the_memory_and_says_by_whom() -> None:
    edge = _edge("supersedes", A, ME)
    belief = project_belief(_facts(edges=(edge, _edge("supersedes", ME, B))))
    assert belief.superseded_by == (A,)
    [reason] = [r for r in belief.reasons if r.code == "superseded"]
    assert reason.as_dict() == {"code": "superseded", "by": str(A), "edge_id": str(edge.edge_id)}


def test_extends_and_derived_from_change_no_label() -> None:
    plain = project_belief(_facts(contributions=(_support(OBS[0]),)))
    linked = project_belief(
        _facts(
            contributions=(_support(OBS[0]),),
            edges=(_edge("extends", A, ME), _edge("derived_from", ME, B)),
        )
    )
    assert (linked.grade, linked.superseded_by, linked.alternatives) == (
        plain.grade,
        plain.superseded_by,
        plain.alternatives,
    )


def test_a_memory_without_versions_is_refused() -> None:
    with pytest.raises(ValueError, match="no version"):
        project_belief(_facts(versions=()))


_uuids = st.sampled_from([ME, A, B, UUID(int=4)])
_contributions = st.builds(
    ContributionFact,
    st.uuids(),
    st.sampled_from([V1, V2]),
    st.sampled_from(OBS),
    st.uuids(),
    st.none(),
    st.floats(0, 1),
    st.booleans(),
)
_edges = st.builds(
    EdgeFact,
    st.uuids(),
    st.sampled_from(["supersedes", "conflicts_with", "extends", "derived_from"]),
    _uuids,
    _uuids,
    st.integers(1, 50),
)


@given(st.lists(_contributions, max_size=8), st.lists(_edges, max_size=6), st.randoms())
def test_the_order_of_facts_never_changes_the_belief(
    contributions: list[ContributionFact], edges: list[EdgeFact], rnd: object
) -> None:
    first = project_belief(
        _facts(contributions=tuple(contributions), edges=tuple(edges), versions=(V1, V2))
    )
    shuffled_c, shuffled_e = list(contributions), list(edges)
    rnd.shuffle(shuffled_c)  # type: ignore[attr-defined]
    rnd.shuffle(shuffled_e)  # type: ignore[attr-defined]
    again = project_belief(
        _facts(contributions=tuple(shuffled_c), edges=tuple(shuffled_e), versions=(V1, V2))
    )
    assert again.grade == first.grade
    assert (again.support, again.alternatives, again.superseded_by) == (
        first.support,
        first.alternatives,
        first.superseded_by,
    )
    assert sorted(map(repr, again.reasons)) == sorted(map(repr, first.reasons))


@given(st.lists(_contributions, max_size=8), st.lists(_edges, max_size=6))
def test_labels_follow_the_edges_exactly(
    contributions: list[ContributionFact], edges: list[EdgeFact]
) -> None:
    belief = project_belief(
        _facts(contributions=tuple(contributions), edges=tuple(edges), versions=(V1, V2))
    )
    superseders = {e.source_id for e in edges if e.kind == "supersedes" and e.target_id == ME}
    assert set(belief.superseded_by) == superseders
    assert set(belief.alternatives) <= {e.source_id for e in edges} | {e.target_id for e in edges}
    assert (belief.grade == "contested") == bool(belief.alternatives)
    assert set(belief.support) <= {c.contribution_id for c in contributions}


def test_archived_and_pinned_are_labels_with_reasons() -> None:
    from palimpsest.domain.belief import Archival, ArchiveFact

    plain = project_belief(_facts())
    assert (plain.archived, plain.pinned) == (None, False)
    forget = ArchiveFact("no longer relevant", UUID(int=77))
    facts = MemoryFacts(ME, "fact", "user", None, None, (V1,), (), (), forget, True)
    belief = project_belief(facts)
    assert belief.archived == Archival("no longer relevant", decision_id=UUID(int=77))
    assert belief.archived.structural is False and belief.pinned is True
    codes = {r.code: r.as_dict() for r in belief.reasons}
    assert codes["archived"] == {
        "code": "archived",
        "reason": "no longer relevant",
        "decision_id": str(UUID(int=77)),
    }
    assert "pinned" in codes
