"""Erasure in the domain: the lineage rule, the aggregates, and the projection."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.belief import ContributionFact, MemoryFacts, project_belief
from palimpsest.domain.erasure import versions_formed_only_from
from palimpsest.domain.evidence import Excerpt
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation

OBS = [UUID(int=100 + i) for i in range(6)]
ERASER = UUID(int=7)
WHO = UUID(int=8)

observation_sets = st.frozensets(st.sampled_from(OBS), max_size=4)


@given(
    versions=st.lists(observation_sets, max_size=6),
    erased=observation_sets,
)
def test_a_version_goes_exactly_when_it_cites_something_and_all_of_it_is_erased(
    versions: list[frozenset[UUID]], erased: frozenset[UUID]
) -> None:
    ids = [UUID(int=1000 + i) for i in range(len(versions))]
    chosen = versions_formed_only_from(zip(ids, versions, strict=True), erased)
    for version_id, cited in zip(ids, versions, strict=True):
        assert (version_id in chosen) == (bool(cited) and cited <= erased)
    assert chosen == [i for i in ids if i in set(chosen)]  # order kept


@given(versions=st.lists(observation_sets, max_size=6), erased=observation_sets)
def test_erasing_more_never_brings_a_version_back(
    versions: list[frozenset[UUID]], erased: frozenset[UUID]
) -> None:
    ids = [UUID(int=1000 + i) for i in range(len(versions))]
    fewer = set(versions_formed_only_from(zip(ids, versions, strict=True), erased))
    more = set(versions_formed_only_from(zip(ids, versions, strict=True), erased | {OBS[0]}))
    assert fewer <= more


def _memory(*cited: tuple[UUID, ...]) -> Memory:
    memory = Memory.create(
        tenant_id=uuid4(),
        memory_type="fact",
        scope="user",
        project=None,
        topic=None,
        principal_id=WHO,
    )
    for i, observations in enumerate(cited):
        memory.record_version(
            content_digest=f"sha256:{i % 2}",
            size_bytes=1,
            excerpts=tuple(Excerpt(o, 0, 1, "sha256:e") for o in observations),
            principal_id=WHO,
            model_id=None,
            trust=1.0,
        )
    return memory


def test_the_last_live_version_going_erases_the_memory() -> None:
    memory = _memory((OBS[0],), (OBS[1],))
    first, second = (v.version_id for v in memory.versions)
    assert memory.erase_versions([first], decision_id=ERASER, principal_id=WHO)
    assert memory.erased_by is None and memory.current_version.version_id == second
    memory.erase_versions([second, first], decision_id=ERASER, principal_id=WHO)
    assert memory.erased_by == ERASER and memory.live_versions == []
    kinds = [type(e).__name__ for e in memory.collect_events()]
    assert kinds.count("VersionErased") == 2 and kinds[-1] == "Erased"
    assert memory.erase(decision_id=uuid4(), principal_id=WHO) == []  # once only


def test_a_digest_is_released_only_when_no_live_version_keeps_it() -> None:
    memory = _memory((OBS[0],), (OBS[1],), (OBS[2],))  # digests 0, 1, 0
    first = memory.versions[0].version_id
    memory.erase_versions([first], decision_id=ERASER, principal_id=WHO)
    [event] = [e for e in memory.collect_events() if isinstance(e, Memory.VersionErased)]
    assert event.release_digest is False  # the third version has the same content
    memory.erase(decision_id=ERASER, principal_id=WHO)
    released = {
        e.version_id: e.release_digest
        for e in memory.collect_events()
        if isinstance(e, Memory.VersionErased)
    }
    assert list(released.values()) == [True, True]


def test_an_observation_is_erased_once_and_keeps_its_deadline() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    obs = Observation(
        tenant_id=uuid4(),
        digest="sha256:x",
        size_bytes=1,
        media_type="text/plain",
        source=None,
        captured_at=now,
        transient=False,
        retention_deadline=now,
        principal_id=WHO,
    )
    assert obs.erase(decision_id=ERASER, principal_id=WHO)
    assert not obs.erase(decision_id=uuid4(), principal_id=WHO)
    assert obs.erased_by == ERASER
    assert not obs.shorten_deadline(now, now=now, principal_id=WHO)


def _facts(versions: tuple[UUID, ...], erased: tuple[UUID, ...] = ()) -> MemoryFacts:
    support = tuple(
        ContributionFact(uuid4(), v, OBS[i], WHO, None, 1.0) for i, v in enumerate(versions)
    )
    return MemoryFacts(
        UUID(int=1), "fact", "user", None, None, versions, support, erased_versions=erased
    )


def test_the_newest_live_version_is_current_and_an_erased_memory_is_a_placeholder() -> None:
    v1, v2 = UUID(int=11), UUID(int=12)
    belief = project_belief(_facts((v1, v2), erased=(v2,)))
    assert belief.current_version_id == v1 and belief.grade == "supported"
    gone = project_belief(replace(_facts((v1, v2), erased=(v1, v2)), erased_by=ERASER))
    assert gone.current_version_id is None and gone.erased_by == ERASER
    assert gone.support == () and gone.grade == "unsupported"
    assert [r.code for r in gone.reasons] == ["erased"]
