"""The synchronous client against a real server: each family of endpoints answers
typed models, errors raise their problem's class, listings and the feed iterate."""

from __future__ import annotations

from uuid import UUID

import pytest

from palimpsest.api.client import (
    AlreadySettledError,
    AuthenticationError,
    Client,
    ConfirmationRequiredError,
    MemoryForgottenError,
    MemorySupersededError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from palimpsest.api.client._beliefs import (
    CurrentBelief,
    ListedCurrentBelief,
    MemoryBatchPublic,
    MemoryPagePublic,
    PendingBelief,
    RecallPublic,
)
from palimpsest.api.client._records import (
    DecisionPublic,
    ErasureReceipt,
    EventPagePublic,
    EventPublic,
    MemoryHistoryPublic,
    MemoryVersionsPublic,
    ObservationPublic,
    RevisionStatusPublic,
)
from palimpsest.api.client.models import (
    BatchPublic,
    CyclePublic,
    DecisionOutcome,
    EdgeCreated,
    ForgettingPolicyPublic,
    JudgmentPublic,
    MemoryCreated,
    ObservationCreated,
    ProposalPagePublic,
    ProposalPublic,
    RetentionPublic,
    Settled,
    VersionCreated,
)
from palimpsest.projections.runtime import Runtime
from tests.api.client.conftest import drain_soon
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up


@pytest.mark.slow
def test_observations_and_memories_answer_typed_models(
    base_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    with Client(base_url, token=tenant.token("writer")) as client:
        # Given an observation and a memory citing an excerpt of it
        observation = client.create_observation("The deploy window is 09:00 to 10:00 UTC.")
        assert isinstance(observation, ObservationCreated)
        created = client.create_memory(
            "Deploys happen at 09:00 UTC",
            type="fact",
            scope="ops",
            topic="deploys",
            evidence=[{"observation_id": observation.id, "start": 0, "end": 39}],
        )
        assert isinstance(created, MemoryCreated) and created.position > observation.position

        # When a read waits while the drain publishes the belief
        drain_soon(runtime)
        belief = client.read_memory(created.id, wait=10)

        # Then it answers the current belief, typed, with the served names read back
        assert isinstance(belief, CurrentBelief)
        assert belief.memory_type == "fact" and belief.content == "Deploys happen at 09:00 UTC"

        revised = client.create_version(created.id, "Deploys happen at 10:00 UTC")
        assert isinstance(revised, VersionCreated) and revised.memory_id == created.id
        assert isinstance(client.read_memory(created.id), PendingBelief)
        drain_until_caught_up(runtime)
        listed = client.list_memories(scope="ops")
        assert isinstance(listed, MemoryPagePublic)
        assert [type(i) for i in listed.items] == [ListedCurrentBelief]
        by_ids = client.read_memories([created.id, observation.id])
        assert isinstance(by_ids, MemoryBatchPublic) and by_ids.not_found == [observation.id]
        versions = client.read_versions(created.id)
        assert isinstance(versions, MemoryVersionsPublic) and len(versions.versions) == 2
        assert versions.versions[0].excerpts[0].observation_id == observation.id
        assert isinstance(client.read_history(created.id), MemoryHistoryPublic)
        assert isinstance(client.read_observation(observation.id), ObservationPublic)
        content = client.read_observation_content(observation.id)
        assert content.text.startswith("The deploy window") and content.media_type == "text/plain"
        assert [o.id for o in client.iter_observations()] == [observation.id]

        # Recall finds it by meaning once indexed
        index_until_caught_up(runtime, tenant.id)
        recalled = client.recall("when do we deploy?", k=3)
        assert isinstance(recalled, RecallPublic) and recalled.items[0].id == created.id


def test_decisions_edges_batches_and_the_feed(
    base_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    with Client(base_url, token=tenant.token("writer")) as client:
        results = client.batch(
            [
                {"op": "create_memory", "type": "decision", "scope": "s", "content": "use A"},
                {"op": "create_memory", "type": "decision", "scope": "s", "content": "use B"},
            ]
        )
        assert isinstance(results, BatchPublic)
        older, newer = (UUID(str(r["id"])) for r in results.results)
        edge = client.create_edge(newer, kind="supersedes", target_id=older, reason="B won")
        assert isinstance(edge, EdgeCreated) and edge.target_id == older
        retracted = client.retract_edge(newer, edge.id, reason="not yet")
        assert isinstance(retracted, DecisionOutcome)

        forgotten = client.forget(older, reason="obsolete")
        assert isinstance(forgotten, DecisionOutcome) and forgotten.kind == "forget"
        assert isinstance(client.read_decision(forgotten.id), DecisionPublic)
        assert client.restore(older).kind == "restore"
        assert client.pin(newer).kind == "pin"
        assert client.unpin(newer, reason="done").kind == "unpin"
        drain_until_caught_up(runtime)
        assert isinstance(client.read_revision(), RevisionStatusPublic)

        page = client.list_events(limit=2)
        assert isinstance(page, EventPagePublic) and len(page.events) == 2
        every = list(client.iter_events(limit=2))
        assert all(isinstance(e, EventPublic) for e in every)
        positions = [e.position for e in every]
        assert positions == sorted(set(positions)) and len(positions) > 2
        # The stream yields the same feed, and stops at its limit
        streamed = list(client.stream_events(limit=len(every)))
        assert [e.position for e in streamed] == positions


def test_listings_iterate_every_page(base_url: str, tenant: Tenant) -> None:
    with Client(base_url, token=tenant.token("writer")) as client:
        ids = [client.create_memory(f"note {n}", type="note", scope="p").id for n in range(5)]
        walked = [m.id for m in client.iter_memories(scope="p", limit=2)]
        assert walked == list(reversed(ids))  # newest first, each once, across 3 pages


def test_tenant_administration(base_url: str, tenant: Tenant) -> None:
    with Client(base_url, token=tenant.admin.token) as client:
        assert isinstance(client.read_retention(), RetentionPublic)
        updated = client.update_retention(raw_hours=48)
        assert updated.raw_hours == 48 and updated.position is not None
        policy = client.update_forgetting_policy(enabled=False, schedule_minutes=90)
        assert isinstance(policy, ForgettingPolicyPublic) and policy.version >= 1
        assert client.read_forgetting_policy().schedule_minutes == 90
        cycle = client.run_cycle(dry_run=True)
        assert isinstance(cycle, CyclePublic) and cycle.dry_run
        ran = client.run_cycle()
        assert client.read_cycle(ran.cycle_id).cycle_id == ran.cycle_id
        judgment = client.update_judgment(enabled=False, daily_calls=3)
        assert isinstance(judgment, JudgmentPublic) and judgment.daily_calls == 3
        assert client.read_judgment().daily_calls == 3

        memory = client.create_memory("to erase", type="note", scope="x")
        target = client.create_memory("to judge", type="note", scope="x")
        recorded = client.record_verdicts(
            [{"memory_id": target.id, "action": "archive", "confidence": 0.99}]
        )
        [result] = recorded.results
        proposals = client.list_proposals()
        assert isinstance(proposals, ProposalPagePublic)
        assert [p.id for p in client.iter_proposals()] == [result.id]
        assert isinstance(client.read_proposal(result.id), ProposalPublic)
        assert client.reject_proposal(result.id, reason="keep it").kind == "reject_proposal"
        assert client.evict_cache().evicted >= 0

        receipt = client.erase(memory_ids=[memory.id], reason="asked to")
        assert isinstance(receipt, ErasureReceipt)
        assert client.read_erasure(receipt.id).id == receipt.id
        lines = list(client.export())
        assert lines[0]["kind"] == "header" and lines[-1]["kind"] == "end"

        # A destructive request raises with the token that confirms it
        with pytest.raises(ConfirmationRequiredError) as refused:
            client.delete_tenant(reason="done")
        deleted = client.delete_tenant(confirm=refused.value.confirmation_token, reason="done")
        assert isinstance(deleted, ErasureReceipt)


def test_errors_raise_the_class_of_their_problem_type(base_url: str, tenant: Tenant) -> None:
    with Client(base_url, token="pal_nobody_secret") as stranger:
        with pytest.raises(AuthenticationError) as unknown:
            stranger.list_memories()
        assert unknown.value.status == 401
    with Client(base_url, token=tenant.token("reader")) as reader:
        with pytest.raises(PermissionDeniedError):
            reader.create_memory("no", type="note", scope="s")
        with pytest.raises(NotFoundError):
            reader.read_history(UUID(int=1))
        with pytest.raises(ValidationError) as invalid:
            reader.list_memories(limit=0)
        assert invalid.value.errors[0]["pointer"] == "/query/limit"


def test_recall_by_words_and_its_pages(base_url: str, runtime: Runtime, tenant: Tenant) -> None:
    with Client(base_url, token=tenant.token("writer")) as client:
        ids = {
            client.create_memory(f"Ticket PAL-12{n} is blocked", type="blocker", scope="b").id
            for n in range(3)
        }
        index_until_caught_up(runtime, tenant.id)
        first = client.recall("ticket blocked", k=1, mode="text", scope="b")
        assert isinstance(first, RecallPublic) and first.mode == "text"
        assert len(first.items) == 1 and first.next_cursor is not None
        walked = [m.id for m in client.iter_recall("ticket blocked", k=1, mode="text")]
        assert set(walked) == ids and len(walked) == 3


def test_conflicts_are_settled_and_an_archived_memory_is_revised_only_when_restored(
    base_url: str, tenant: Tenant
) -> None:
    with Client(base_url, token=tenant.token("writer")) as client:
        # Given a preference, then a changed one, told of what it may contradict
        old = client.create_memory("Prefers dark mode", type="preference", scope="u")
        new = client.create_memory("Now prefers light mode", type="preference", scope="u")
        assert new.potential_contradictions is not None

        # When the caller settles it: the new one supersedes the old one
        settled = client.settle(new.id, old.id, resolution="supersedes", reason="switched")
        assert isinstance(settled, Settled) and settled.edge_id is not None
        assert not settled.replayed
        assert client.settle(new.id, old.id, resolution="supersedes", reason="again").replayed
        with pytest.raises(AlreadySettledError):
            client.settle(new.id, old.id, resolution="both_stand", reason="both hold")

        # Then the old one is revised only if restored, in the same write
        with pytest.raises(MemorySupersededError):
            client.create_version(old.id, "Prefers dark mode again")
        restored = client.create_version(old.id, "Prefers dark mode again", restore=True)
        assert isinstance(restored, VersionCreated) and restored.memory_id == old.id

        # Both may stand: nothing is archived, no edge
        tea = client.create_memory("Likes tea", type="preference", scope="v")
        coffee = client.create_memory("Likes coffee", type="preference", scope="v")
        stood = client.settle(coffee.id, tea.id, resolution="both_stand", reason="likes both")
        assert stood.resolution == "both_stand" and stood.edge_id is None

        # A new memory names what it supersedes, recorded with it
        newest = client.create_memory(
            "Prefers the system theme", type="preference", scope="u", supersedes=[new.id]
        )
        assert [s.target_id for s in newest.supersedes or []] == [new.id]

        # A forgotten memory is not revised silently either
        client.forget(tea.id, reason="gave it up")
        with pytest.raises(MemoryForgottenError):
            client.create_version(tea.id, "Likes green tea")
