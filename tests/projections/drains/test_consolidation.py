"""Consolidation's merges on real PostgreSQL, with a fixed clock: a merge is a proposal
by default, a person applying it folds the memories into one that keeps every source's
excerpts, and the tenant's policy lets extractive merges of near duplicates apply."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from fastapi.testclient import TestClient

from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains._consolidation import consolidate_survivors
from palimpsest.projections.judgment.summariser import OpenAICompatibleSummariser
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.api.test_review_page import _sign_in
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up
from tests.projections.drains.test_decay_cycle import app_clock, cycle, set_policy
from tests.projections.drains.test_forgetting_pass import RefusingEndpoint

NOW = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Knobs:
    """The forgetting policy's consolidation fields."""

    merge_similarity_floor: float = 0.9
    auto_apply_extractive_merges: bool = False
    reflections_enabled: bool = False
    version: int = 0


def _writer(runtime: Runtime) -> Writer:
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    return Writer(runtime.log, policy, clock=lambda: NOW)


def _cited(client: TestClient, tenant: Tenant, said: str, content: str, **fields: Any) -> str:
    """A memory citing the whole of a new observation; return its id."""
    obs = observe(client, tenant.headers(), said)
    evidence = [{"observation_id": obs, "start": 0, "end": len(said)}]
    return str(
        remember(client, tenant.headers(), content=content, evidence=evidence, **fields)["id"]
    )


def _consolidate(runtime: Runtime, tenant: Tenant, ids: list[str], **knobs: Any) -> dict[str, Any]:
    index_until_caught_up(runtime, tenant.id)
    dry_run = bool(knobs.pop("dry_run", False))
    return consolidate_survivors(
        runtime.log,
        _writer(runtime),
        tenant.id,
        snapshot=NOW,
        policy=Knobs(**knobs),
        survivors=sorted((UUID(i) for i in ids), key=str),
        cycle_id=uuid4(),
        dry_run=dry_run,
        model_id=runtime.embedder.model_id,
        summariser=None,
    )


def _belief(client: TestClient, tenant: Tenant, memory_id: str) -> dict[str, Any]:
    drain_until_caught_up(tenant.runtime)
    response = client.get(f"/v1/memories/{memory_id}?wait=5", headers=tenant.headers())
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "current", response.text
    return dict(response.json()["belief"])


def _evidence(client: TestClient, tenant: Tenant, memory_id: str) -> set[str]:
    versions = client.get(f"/v1/memories/{memory_id}/versions", headers=tenant.headers()).json()
    return {e["observation_id"] for e in versions["versions"][-1]["evidence"]}


def _listed_ids(client: TestClient, tenant: Tenant) -> set[str]:
    drain_until_caught_up(tenant.runtime)
    response = client.get("/v1/memories?limit=100", headers=tenant.headers())
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["items"]}


def test_a_merge_is_proposed_and_applying_it_keeps_every_source_excerpt(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    strong = _cited(client, tenant, "Ann: we deploy on Fridays.", "The team deploys on Fridays")
    obs = observe(client, tenant.headers(), "Bob: deploys happen on Fridays, always.")
    post(
        client,
        f"/v1/memories/{strong}/contributions",
        {"evidence": [{"observation_id": obs, "start": 0, "end": 10}]},
        tenant.headers(),
    )
    weak = _cited(client, tenant, "Cy: Friday is deploy day.", "The team deploys on Fridays.")
    tea = _cited(client, tenant, "Dee: tea, please.", "Prefers green tea")
    episode = [
        _cited(client, tenant, f"log {n}", "Deployed release 1.2", type="event") for n in (1, 2)
    ]
    ids = [strong, weak, tea, *episode]

    report = _consolidate(runtime, tenant, ids)
    assert report["groups"] == 1 and report["proposed"] == 1 and report["merged"] == 0
    assert _belief(client, tenant, weak)["labels"]["archived"] is None, "nothing applied yet"

    listed = client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"]
    [proposal] = listed
    assert proposal["memory"]["id"] == strong, "the best-supported member is the centre"
    assert [s["id"] for s in proposal["sources"]] == [strong, weak]
    assert proposal["merged_content"] == "The team deploys on Fridays"
    assert proposal["model"] == "extractive"

    before = _listed_ids(client, tenant)
    sources_evidence = _evidence(client, tenant, strong) | _evidence(client, tenant, weak)
    applied = post(
        client, f"/v1/proposals/{proposal['id']}/apply", {"reason": "same fact"}, tenant.headers()
    )
    assert applied.status_code == 201, applied.text
    [merged] = _listed_ids(client, tenant) - before
    assert _listed_ids(client, tenant) == (before - {strong, weak}) | {merged}
    assert _evidence(client, tenant, merged) == sources_evidence
    assert len(sources_evidence) == 2  # each version's cited excerpts
    for source in (strong, weak):
        archived = _belief(client, tenant, source)["labels"]["archived"]
        assert archived["reason"] == "superseded" and archived["superseded_by"] == merged
    text = client.get(f"/v1/memories/{merged}/versions", headers=tenant.headers()).json()
    assert text["versions"][-1]["content"] == "The team deploys on Fridays"

    # The consolidated memory is an ordinary memory: the next run sees it, alone.
    again = _consolidate(runtime, tenant, [merged, tea, *episode])
    assert again["groups"] == 0


def test_near_duplicates_merge_directly_only_under_the_policy(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    a = _cited(client, tenant, "Eve: I use vim.", "Edits code in vim", type="preference")
    b = _cited(client, tenant, "Eve again: vim.", "Edits code in vim", type="preference")
    pinned = _cited(client, tenant, "Eve, pinned: vim.", "Edits code in vim", type="preference")
    assert post(client, f"/v1/memories/{pinned}/pin", {}, tenant.headers()).status_code in (
        200,
        201,
    )
    before = _listed_ids(client, tenant)

    report = _consolidate(runtime, tenant, [a, b, pinned], auto_apply_extractive_merges=True)
    assert report["merged"] == 1 and report["proposed"] == 0
    assert client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"] == []
    [merged] = _listed_ids(client, tenant) - before
    assert _listed_ids(client, tenant) == {merged, pinned}, "a pinned memory is never folded"
    assert _evidence(client, tenant, merged) == _evidence(client, tenant, a) | _evidence(
        client, tenant, b
    )
    # The next cycle scores the consolidated memory like any other, and not its sources.
    drain_until_caught_up(runtime)
    scored = cycle(client, runtime, tenant, NOW + timedelta(days=1), dry_run=True).scores or []
    assert {str(s["memory_id"]) for s in scored} == {merged, pinned}


def test_a_merge_whose_source_changed_is_refused_as_stale(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    a = _cited(client, tenant, "Fay: blocked on CI.", "Blocked on the CI runner", type="blocker")
    b = _cited(client, tenant, "Fay: CI blocks.", "Blocked on the CI runner.", type="blocker")
    assert _consolidate(runtime, tenant, [a, b])["proposed"] == 1
    [proposal] = client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"]
    revised = post(client, f"/v1/memories/{b}/versions", {"content": "CI fixed"}, tenant.headers())
    assert revised.status_code == 201, revised.text
    before = _listed_ids(client, tenant)
    refused = post(client, f"/v1/proposals/{proposal['id']}/apply", {}, tenant.headers())
    assert refused.status_code == 409
    assert problem_slug(refused) == "stale-proposal"
    assert _listed_ids(client, tenant) == before


def test_a_merge_proposal_whose_source_was_pinned_since_is_refused_as_stale(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    a = _cited(client, tenant, "Kim: the wiki is Confluence.", "The wiki runs on Confluence")
    b = _cited(client, tenant, "Kim: Confluence wiki.", "The wiki runs on Confluence.")
    assert _consolidate(runtime, tenant, [a, b])["proposed"] == 1
    [proposal] = client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"]
    pinned = post(client, f"/v1/memories/{a}/pin", {}, tenant.headers())
    assert pinned.status_code in (200, 201), pinned.text
    before = _listed_ids(client, tenant)

    refused = post(client, f"/v1/proposals/{proposal['id']}/apply", {}, tenant.headers())

    assert refused.status_code == 409, refused.text
    assert problem_slug(refused) == "stale-proposal"
    assert _listed_ids(client, tenant) == before
    assert _belief(client, tenant, a)["labels"]["superseded_by"] == []


class _PinningFirst(Writer):
    """The write path, with a person pinning a memory just before consolidation's first
    write reaches it: after the merge groups were formed from the aggregates, before
    the merge is written."""

    def __init__(self, runtime: Runtime, client: TestClient, tenant: Tenant, memory: str) -> None:
        super().__init__(runtime.log, _writer(runtime).policy, clock=lambda: NOW)
        self.client, self.tenant, self.memory = client, tenant, memory
        self.pinned = False

    def write(self, *args: Any, **kwargs: Any) -> Any:
        if not self.pinned:
            self.pinned = True
            path = f"/v1/memories/{self.memory}/pin"
            assert post(self.client, path, {}, self.tenant.headers()).status_code in (200, 201)
        return super().write(*args, **kwargs)


def test_a_memory_pinned_before_its_merge_is_written_is_not_merged(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    a = _cited(client, tenant, "Lou: we use pnpm.", "Installs packages with pnpm", type="fact")
    b = _cited(client, tenant, "Lou again: pnpm.", "Installs packages with pnpm", type="fact")
    before = _listed_ids(client, tenant)
    index_until_caught_up(runtime, tenant.id)

    report = consolidate_survivors(
        runtime.log,
        _PinningFirst(runtime, client, tenant, b),
        tenant.id,
        snapshot=NOW,
        policy=Knobs(auto_apply_extractive_merges=True),
        survivors=sorted((UUID(a), UUID(b)), key=str),
        cycle_id=uuid4(),
        dry_run=False,
        model_id=runtime.embedder.model_id,
        summariser=None,
    )

    assert report["groups"] == 1 and report["merged"] == 0
    assert _listed_ids(client, tenant) == before, "nothing folded: the pin stands"
    assert _belief(client, tenant, b)["labels"]["pinned"] is True
    assert client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"] == []


def test_a_dry_run_or_a_high_floor_writes_nothing(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    a = _cited(client, tenant, "Gus: Postgres 16.", "Runs Postgres 16")
    b = _cited(client, tenant, "Gus: PG16.", "Runs Postgres 16")
    index_until_caught_up(runtime, tenant.id)
    before = snapshot()
    assert _consolidate(runtime, tenant, [a, b], dry_run=True)["groups"] == 1
    assert _consolidate(runtime, tenant, [a, b], merge_similarity_floor=1.01)["groups"] == 0
    assert snapshot() == before


def test_the_review_page_shows_a_merge_and_applies_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    a = _cited(client, tenant, "Hal: staging is eu-west.", "Staging runs in eu-west-1")
    b = _cited(client, tenant, "Hal again: eu-west.", "Staging runs in eu-west-1.")
    assert _consolidate(runtime, tenant, [a, b])["proposed"] == 1
    [proposal] = client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"]
    before = _listed_ids(client, tenant)
    with TestClient(client.app, follow_redirects=False) as page:
        csrf = _sign_in(page, tenant.token("writer"))
        listing = page.get("/review?action=merge")
        assert listing.status_code == 200, listing.text
        assert "Merged text" in listing.text and listing.text.count("Staging runs in") >= 3
        applied = page.post(f"/review/proposals/{proposal['id']}/apply", data={"csrf": csrf})
        assert applied.status_code in (200, 303), applied.text
    assert len(_listed_ids(client, tenant) - before) == 1
    assert {a, b}.isdisjoint(_listed_ids(client, tenant))


def test_a_failing_model_skips_the_merge_and_writes_nothing(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    a = _cited(client, tenant, "Ivy: lint on commit.", "Runs the linter on every commit")
    b = _cited(client, tenant, "Ivy: lint each commit.", "Runs the linter on every commit.")
    index_until_caught_up(runtime, tenant.id)
    endpoint = RefusingEndpoint()
    try:
        before = snapshot()
        report = consolidate_survivors(
            runtime.log,
            _writer(runtime),
            tenant.id,
            snapshot=NOW,
            policy=Knobs(auto_apply_extractive_merges=True),
            survivors=sorted((UUID(a), UUID(b)), key=str),
            cycle_id=uuid4(),
            dry_run=False,
            model_id=runtime.embedder.model_id,
            summariser=OpenAICompatibleSummariser(
                f"http://127.0.0.1:{endpoint.server.server_port}", "no-model", retries=0
            ),
        )
        assert report["groups"] == 1 and report["proposed"] == report["merged"] == 0
        assert len(report["failures"]) == 1 and endpoint.requests == 1
        assert snapshot() == before, "no silent fallback to an extractive merge"
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()


def test_the_cycle_evicts_first_then_consolidates_the_survivors(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    """Two similar notes; only one was read lately. The cycle archives the other as
    decayed, then consolidates what is left: nothing to merge. Swapped, the two would
    have been grouped (and the merged memory would have escaped scoring)."""
    headers = tenant.headers("writer")
    read = remember(client, headers, type="note", content="Buy oat milk on the way home")["id"]
    stale = remember(client, headers, type="note", content="Buy oat milk on the way home today")[
        "id"
    ]
    set_policy(
        client,
        tenant,
        prune_below=0.3,
        auto_archive_decayed=True,
        auto_apply_extractive_merges=True,
        merge_similarity_floor=0.5,
        duplicate_floor=1.0,
    )
    later = NOW + timedelta(days=400)
    index_until_caught_up(runtime, tenant.id)
    # Before the cycle, the pair is a merge group.
    assert (
        _consolidate(runtime, tenant, [read, stale], merge_similarity_floor=0.5, dry_run=True)[
            "groups"
        ]
        == 1
    )
    with app_clock(client, later - timedelta(hours=1)):
        assert client.get(f"/v1/memories/{read}", headers=headers).status_code == 200

    report = cycle(client, runtime, tenant, later)

    assert report.archived == [stale]
    assert report.consolidation is not None
    assert report.consolidation["groups"] == 0 and report.consolidation["merged"] == 0
    assert _belief(client, tenant, stale)["labels"]["archived"]["reason"] == "decayed"
    assert _belief(client, tenant, read)["labels"]["archived"] is None
    assert _listed_ids(client, tenant) == {read}


def test_a_merge_proposal_never_serves_its_text_once_a_source_is_erased(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    a = _cited(client, tenant, "Jo: the VPN is WireGuard.", "The VPN runs WireGuard")
    b = _cited(client, tenant, "Jo: WireGuard VPN.", "The VPN runs WireGuard.")
    assert _consolidate(runtime, tenant, [a, b])["proposed"] == 1
    [proposal] = client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"]
    assert proposal["merged_content"] is not None
    assert proposal["memory"]["id"] == b, "the newer is the centre"
    # The older source's erasure: the merged text is the centre's, but a model's could
    # repeat the erased one, so it is not served.
    erased = post(client, "/v1/erasures", {"memory_ids": [a], "reason": "asked"}, tenant.headers())
    assert erased.status_code == 201, erased.text
    shown = client.get(f"/v1/proposals/{proposal['id']}", headers=tenant.headers()).json()
    assert shown["merged_content"] is None and shown["changed"] is True
    refused = post(client, f"/v1/proposals/{proposal['id']}/apply", {}, tenant.headers())
    assert refused.status_code == 409 and problem_slug(refused) == "stale-proposal"
