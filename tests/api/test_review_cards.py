"""Review cards a person can decide from, and the operator's whole path, in Chromium.

A card shows both memories' recorded and last-touched times, their evidence
excerpts with source, the verdict's reason and what changed since; the
collapse-guard box only where applying would pass the guard; the page has a
favicon. The operator test follows docs/forgetting-pass.md ("A person as the
judge") and nothing else: the CLI runs the pass, the items are read and
answered by ref, and the proposals are decided on the page, without looking
an id up anywhere. Screenshots go to ``docs/`` only with
``PALIMPSEST_UPDATE_SCREENSHOT=1``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.cli import main
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.api.live_server import live_server
from tests.api.test_review_page import CHROMIUM, _playwright, _problem, _sign_in_in
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _cited(client: TestClient, tenant: Tenant, text: str, when: datetime, **fields: Any) -> Any:
    observation = client.post(
        "/v1/observations",
        json={"content": text, "captured_at": when.isoformat(), "source": "slack:#ops"},
        headers=tenant.headers(),
    )
    assert observation.status_code == 201, observation.text
    evidence = [{"observation_id": observation.json()["id"], "start": 0, "end": len(text)}]
    return remember(client, tenant.headers(), content=text, evidence=evidence, **fields)


def _shot(page: Any, name: str, tmp_path: Path) -> None:
    update = os.environ.get("PALIMPSEST_UPDATE_SCREENSHOT") == "1"
    path = DOCS / name if update else tmp_path / name
    page.screenshot(path=str(path))  # the viewport: a small file for docs/
    assert path.stat().st_size > 0


@pytest.mark.slow
def test_a_card_shows_times_evidence_reason_and_what_changed(
    client: TestClient, runtime: Runtime, tenant: Tenant, tmp_path: Path
) -> None:
    sync_playwright = _playwright()
    old = datetime.now(UTC) - timedelta(days=75)
    window = _cited(client, tenant, "Deploys happen at 09:00 UTC.", old, type="fact")
    newer = _cited(
        client, tenant, "Deploys moved to 14:00 UTC.", old + timedelta(days=60), type="fact"
    )
    sprint = remember(client, tenant.headers(), type="fact", content="Sprints last two weeks.")
    verdicts = [
        {
            "memory_id": window["id"],
            "action": "supersede",
            "related_memory_id": newer["id"],
            "confidence": 0.95,
            "note": "the newer deploy window replaces it",
        },
        {"memory_id": sprint["id"], "action": "archive", "confidence": 0.97},
    ]
    body = {"verdicts": verdicts}
    recorded = post(client, "/v1/forgetting/verdicts", body, tenant.headers())
    assert recorded.status_code == 201, recorded.text
    supersede, archive = (r["id"] for r in recorded.json()["results"])
    changed = post(
        client, f"/v1/memories/{sprint['id']}/versions", {"content": "Three"}, tenant.headers()
    )
    assert changed.status_code in (200, 201), changed.text
    drain_until_caught_up(runtime)
    app = create_app(ApiSettings(), runtime)
    with live_server(app) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            missing: list[str] = []
            page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if _problem(m) else None)
            _sign_in_in(page, base, tenant.admin.token)
            card = page.locator(f"#proposal-{supersede}")
            text = card.inner_text()
            # Both memories' times: the older's evidence was captured 75 days ago
            assert card.locator("dd.recorded").count() == 2
            assert card.locator("dd.touched").count() == 2
            assert old.strftime("%Y-%m-%d") in text and "slack:#ops" in text
            assert "Deploys happen at 09:00 UTC." in card.locator(".evidence q").first.inner_text()
            assert "the newer deploy window replaces it" in text
            # The allowance holds today's applies: no box to confirm past the guard
            assert card.locator("input[name=confirm_bulk]").count() == 0
            # What changed since the verdict, on the other card
            stale = page.locator(f"#proposal-{archive}").inner_text()
            assert "Changed since the verdict: another version" in stale
            assert "none given" in stale  # no reason was given for that verdict
            # The page's icon is served: nothing it loads answers 404
            icon = page.locator("link[rel=icon]").get_attribute("href")
            assert icon == "/review/static/favicon.svg"
            assert page.request.get(f"{base}{icon}").status == 200
            assert missing == [] and problems == []
            _shot(page, "review-card.png", tmp_path)
        finally:
            browser.close()


PAIRS = (
    ("ops", "The staging database is PostgreSQL 14.", "The staging database is PostgreSQL 16."),
    ("web", "The web app is built with webpack.", "The web app is now built with Vite."),
    ("ci", "CI runs on Jenkins.", "CI moved from Jenkins to GitHub Actions."),
    ("docs", "The docs are hosted on Read the Docs.", "The docs are now hosted on Pages."),
    ("team", "Stand-up is at 9:30.", "Stand-up moved to 10:00."),
)


def _apply_four_reject_one(page: Any) -> None:
    for n in range(5):
        shown = page.locator("article.proposal").first.get_attribute("id")
        card = page.locator(f"#{shown}")
        assert "slack:#ops" in card.inner_text()  # the evidence, on the card
        if n < 4:
            card.locator("form.apply input[name=reason]").fill("confirmed with the team")
            card.locator("button.apply").click()
        else:
            card.locator("form.reject input[name=reason]").fill("both still hold")
            card.locator("button.reject").click()
        card.wait_for(state="detached")


@pytest.mark.slow
def test_an_operator_judges_ten_items_from_the_cli_and_the_page(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sync_playwright = _playwright()
    for n, (scope, older, newer) in enumerate(PAIRS):
        when = datetime(2023, 3, 1 + n, 9, tzinfo=UTC)
        _cited(client, tenant, older, when, type="fact", scope=scope)
        _cited(client, tenant, newer, when + timedelta(days=30), type="fact", scope=scope)
    index_until_caught_up(runtime, tenant.id)
    # The administrator opts the tenant in; the deployment's judge is a person
    opt_in = {"enabled": True, "daily_calls": 10, "daily_tokens": 100_000}
    assert client.put("/v1/tenant/judgment", json=opt_in, headers=tenant.headers()).is_success
    monkeypatch.setenv("PALIMPSEST_FORGETTING_PASS_ENABLED", "true")
    monkeypatch.setenv("PALIMPSEST_JUDGE", "operator")
    monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.admin.token)
    app = create_app(ApiSettings(), runtime)
    with live_server(app) as base, sync_playwright() as playwright:
        # 1. The CLI runs the pass: its items are queued for people
        capsys.readouterr()
        assert main(["forgetting-pass", "--url", base]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["queued"] == report["items"] >= 10
        # 2. The items, each side with its id, scope and evidence, answered by ref
        listed = client.get("/v1/forgetting/items", headers=tenant.headers("reader")).json()
        pairs = [i for i in listed["items"] if i["kind"] == "pair"]
        singles = [i for i in listed["items"] if i["kind"] == "single"]
        assert len(pairs) == 5 and all(p["older"]["evidence"] for p in pairs)
        verdicts = [
            {"ref": p["ref"], "action": "supersede", "confidence": 0.95, "note": "replaced"}
            for p in pairs
        ] + [{"ref": s["ref"], "action": "keep", "confidence": 0.9} for s in singles[:5]]
        assert len(verdicts) == 10
        body = {"verdicts": verdicts, "items_digest": listed["items_digest"]}
        recorded = post(client, "/v1/forgetting/verdicts", body, tenant.headers("writer"))
        assert recorded.status_code == 201, recorded.text
        statuses = [r["status"] for r in recorded.json()["results"]]
        assert statuses == ["proposed"] * 5 + ["dismissed"] * 5
        # 3. On the page: apply four supersedes, reject one
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            _sign_in_in(page, base, tenant.token("writer"))
            assert page.locator("article.proposal").count() == 5
            _shot(page, "operator-review.png", tmp_path)
            _apply_four_reject_one(page)
        finally:
            browser.close()
    decided = client.get(
        "/v1/proposals", params={"status": "applied"}, headers=tenant.headers("reader")
    ).json()["items"]
    assert len(decided) == 4 and all(p["action"] == "supersede" for p in decided)
    left = client.get("/v1/proposals", headers=tenant.headers("reader")).json()["items"]
    assert left == []


@pytest.mark.slow
def test_the_page_shows_cycle_runs_and_why_each_proposed_a_prune(
    client: TestClient, runtime: Runtime, tenant: Tenant, tmp_path: Path
) -> None:
    sync_playwright = _playwright()
    note = remember(client, tenant.headers("writer"), type="note", content="Try the new linter.")
    drain_until_caught_up(runtime)
    policy = {"fade_below": 1.0, "prune_below": 1.0}
    assert client.put("/v1/tenant/forgetting", json=policy, headers=tenant.headers()).is_success
    ran = post(client, "/v1/cycles", {}, tenant.headers())
    assert ran.status_code == 200, ran.text
    [proposal] = ran.json()["proposals"]
    app = create_app(ApiSettings(), runtime)
    with live_server(app) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            _sign_in_in(page, base, tenant.token("writer"))
            page.click("text=Decay cycle runs")
            page.wait_for_url(f"{base}/review/cycles")
            row = page.locator(f"tr[data-cycle='{ran.json()['cycle_id']}']")
            assert "1" in row.inner_text()  # one prune, one proposal
            row.locator("a").click()
            page.wait_for_url(f"{base}/review/cycles/{ran.json()['cycle_id']}")
            assert "prune 1" in page.locator(".counts").inner_text()
            card = page.locator(f"#proposal-{proposal}")
            text = card.inner_text()
            assert "Try the new linter." in text
            # Why it pruned: the score, each factor, and the lowest one explained
            assert "retention score" in text and "recency" in text and "lowest:" in text
            assert "how recently it was written or used" in page.content()
            _shot(page, "review-cycle.png", tmp_path)
            card.locator("form.reject input[name=reason]").fill("still trying it")
            card.locator("button.reject").click()
            card.wait_for(state="detached")
        finally:
            browser.close()
    decided = client.get(f"/v1/proposals/{proposal}", headers=tenant.headers("reader")).json()
    assert decided["status"] == "rejected" and decided["memory"]["id"] == note["id"]
