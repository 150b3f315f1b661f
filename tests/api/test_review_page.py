"""The review page: a person signs in with a token and applies or rejects proposals.

The browser test drives Debian's Chromium (``/usr/bin/chromium``) through
Playwright against the real app on loopback, and takes a screenshot (into
``docs/review-page.png`` only with ``PALIMPSEST_UPDATE_SCREENSHOT=1``, so that a
test run leaves the checkout as it was); the session, CSRF and header rules are also
checked through the ASGI app, where that is cheaper.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._sessions import COOKIE
from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.routers._review import HTMX_VERSION
from palimpsest.projections.commands.tokens import issue_token, revoke_token
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.api.live_server import live_server
from tests.conftest import Tenant, drain_until_caught_up

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "review-page.png"


def _propose(client: TestClient, tenant: Tenant, **verdict: Any) -> str:
    body = {"verdicts": [{"confidence": 0.97, **verdict}]}
    response = post(client, "/v1/forgetting/verdicts", body, tenant.headers("writer"))
    assert response.status_code == 201, response.text
    [result] = response.json()["results"]
    assert result["status"] == "proposed"
    return str(result["id"])


def _proposal(client: TestClient, tenant: Tenant, proposal: str) -> dict[str, Any]:
    response = client.get(f"/v1/proposals/{proposal}", headers=tenant.headers("reader"))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _hidden(html: str, name: str = "csrf") -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


@pytest.fixture
def browser_client(client: TestClient) -> Iterator[TestClient]:
    """A client of the same app with a cookie jar of its own (a fresh browser)."""
    with TestClient(client.app, follow_redirects=False) as fresh:
        yield fresh


def _sign_in(page: TestClient, token: str) -> str:
    """Sign in through the form; return the list page's CSRF token."""
    form = page.get("/review/sign-in")
    assert form.status_code == 200
    signed = page.post("/review/sign-in", data={"csrf": _hidden(form.text), "token": token})
    assert signed.status_code == 303 and signed.headers["location"] == "/review"
    listing = page.get("/review")
    assert listing.status_code == 200, listing.text
    return _hidden(listing.text)


def test_a_signed_out_visitor_is_sent_to_sign_in_and_cannot_decide(
    browser_client: TestClient, client: TestClient, tenant: Tenant
) -> None:
    memory = remember(client, tenant.headers(), content="Uses Jenkins")
    proposal = _propose(client, tenant, memory_id=memory["id"], action="archive")
    listing = browser_client.get("/review")
    assert listing.status_code == 303 and listing.headers["location"] == "/review/sign-in"
    decided = browser_client.post(f"/review/proposals/{proposal}/apply", data={"csrf": "x"})
    assert decided.status_code == 303 and decided.headers["location"] == "/review/sign-in"
    htmx = browser_client.post(
        f"/review/proposals/{proposal}/apply", data={"csrf": "x"}, headers={"HX-Request": "true"}
    )
    assert htmx.status_code == 401 and htmx.headers["hx-redirect"] == "/review/sign-in"
    assert _proposal(client, tenant, proposal)["status"] == "proposed"


def test_signing_in_sets_a_strict_http_only_cookie_that_is_not_the_token(
    client: TestClient, tenant: Tenant
) -> None:
    token = tenant.token("writer")
    for base, secure in (("http://testserver", False), ("https://testserver", True)):
        with TestClient(client.app, base_url=base, follow_redirects=False) as page:
            form = page.get("/review/sign-in")
            signed = page.post("/review/sign-in", data={"csrf": _hidden(form.text), "token": token})
            assert signed.status_code == 303
            [cookie] = [
                c for c in signed.headers.get_list("set-cookie") if c.startswith(f"{COOKIE}=")
            ]
            attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")[1:]}
            assert {"httponly", "samesite", "path"} <= attributes
            assert "samesite=strict" in cookie.lower() and "path=/review" in cookie.lower()
            assert ("secure" in attributes) is secure
            value = cookie.split(";", 1)[0].split("=", 1)[1]
            assert token not in value and token.split("_", 2)[-1] not in value  # the secret
            assert page.get("/review").status_code == 200


def test_a_wrong_token_or_a_forged_sign_in_form_starts_no_session(
    browser_client: TestClient, tenant: Tenant
) -> None:
    form = browser_client.get("/review/sign-in")
    nonce = _hidden(form.text)
    wrong = browser_client.post(
        "/review/sign-in", data={"csrf": nonce, "token": "pal_" + "0" * 32 + "_" + "x" * 43}
    )
    assert wrong.status_code == 401 and 'data-problem="unauthenticated"' in wrong.text
    assert COOKIE not in browser_client.cookies
    # A form posted from another page holds no nonce of this browser's sign-in cookie.
    browser_client.cookies.clear()
    forged = browser_client.post(
        "/review/sign-in", data={"csrf": nonce, "token": tenant.token("writer")}
    )
    assert forged.status_code == 403 and 'data-problem="forbidden"' in forged.text
    assert COOKIE not in browser_client.cookies
    assert browser_client.get("/review").status_code == 303


def test_a_decision_without_the_session_csrf_token_is_refused_and_writes_nothing(
    browser_client: TestClient, client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    memory = remember(client, tenant.headers(), content="Deploys on Fridays")
    proposal = _propose(client, tenant, memory_id=memory["id"], action="archive")
    csrf = _sign_in(browser_client, tenant.token("writer"))
    path = f"/review/proposals/{proposal}/apply"
    before = snapshot()
    for data, headers in (
        ({"reason": "no token"}, {}),
        ({"reason": "wrong token", "csrf": csrf[::-1]}, {}),
        ({"reason": "from elsewhere", "csrf": csrf}, {"Sec-Fetch-Site": "cross-site"}),
        ({"reason": "a sibling site", "csrf": csrf}, {"Sec-Fetch-Site": "same-site"}),
    ):
        refused = browser_client.post(path, data=data, headers=headers)
        assert refused.status_code == 403, data
        assert 'data-problem="forbidden"' in refused.text
    assert snapshot() == before
    # With the token the same form applies it (no JavaScript: a redirect to the list).
    applied = browser_client.post(path, data={"reason": "moved on", "csrf": csrf})
    assert applied.status_code == 303 and applied.headers["location"] == "/review"
    done = _proposal(client, tenant, proposal)
    assert done["status"] == "applied"
    decision = client.get(f"/v1/decisions/{done['decision_id']}", headers=tenant.headers())
    assert decision.json()["reason"] == "moved on"


def test_revoking_the_token_or_signing_out_ends_the_session(
    browser_client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    issued = issue_token(runtime.log, tenant.id, "reviewer", "writer")
    csrf = _sign_in(browser_client, issued.token)
    revoke_token(runtime.log, tenant.id, issued.token_id)
    assert browser_client.get("/review").headers["location"] == "/review/sign-in"
    # Signing out: the cookie is cleared, and the old value no longer opens the page.
    csrf = _sign_in(browser_client, tenant.token("reader"))
    old = browser_client.cookies[COOKIE]
    refused = browser_client.post("/review/sign-out", data={})
    assert refused.status_code == 403
    out = browser_client.post("/review/sign-out", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/review/sign-in"
    assert COOKIE not in browser_client.cookies
    browser_client.cookies.set(COOKIE, old, path="/review")
    assert browser_client.get("/review").headers["location"] == "/review/sign-in"


def test_a_reader_sees_proposals_without_controls_and_cannot_decide(
    browser_client: TestClient, client: TestClient, tenant: Tenant
) -> None:
    memory = remember(client, tenant.headers(), content="Uses Trello")
    proposal = _propose(client, tenant, memory_id=memory["id"], action="archive")
    csrf = _sign_in(browser_client, tenant.token("reader"))
    listing = browser_client.get("/review")
    assert "Uses Trello" in listing.text and f'id="proposal-{proposal}"' in listing.text
    assert "/apply" not in listing.text and "/reject" not in listing.text
    for verdict in ("apply", "reject"):
        refused = browser_client.post(
            f"/review/proposals/{proposal}/{verdict}", data={"csrf": csrf, "reason": "x"}
        )
        assert refused.status_code == 403 and 'data-problem="forbidden"' in refused.text
    assert _proposal(client, tenant, proposal)["status"] == "proposed"


def test_the_page_escapes_content_and_is_served_under_a_strict_policy(
    browser_client: TestClient, client: TestClient, tenant: Tenant
) -> None:
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    memory = remember(client, tenant.headers(), content=hostile)
    _propose(client, tenant, memory_id=memory["id"], action="archive", note="<b>old</b>")
    _sign_in(browser_client, tenant.token("writer"))
    page = browser_client.get("/review")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<script>alert" not in page.text and "<img src=x" not in page.text
    assert "&lt;b&gt;old&lt;/b&gt;" in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"
    assert "<style" not in page.text and " style=" not in page.text
    assert not re.search(r"<script(?![^>]*\ssrc=)", page.text)  # every script is a file
    script = browser_client.get("/review/static/htmx.min.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.headers["x-content-type-options"] == "nosniff"
    assert f"htmx {HTMX_VERSION} " in script.text[:200]
    assert browser_client.get("/review/static/../app.py").status_code == 404


def test_filters_pages_and_a_plain_form_error_shown_on_its_card(
    browser_client: TestClient, client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    facts = [remember(client, headers, type="fact", content=f"Fact {n}") for n in range(21)]
    archived = [_propose(client, tenant, memory_id=m["id"], action="archive") for m in facts]
    older = remember(client, headers, content="Runs 5K in 27:12")
    newer = remember(client, headers, content="Runs 5K in 25:50")
    pair = _propose(
        client, tenant, memory_id=older["id"], action="supersede", related_memory_id=newer["id"]
    )
    csrf = _sign_in(browser_client, tenant.token("writer"))
    first = browser_client.get("/review").text
    assert first.count('class="proposal') == 20
    assert f'id="proposal-{pair}"' in first  # newest first
    following = re.search(r'href="(/review\?[^"]*cursor=[^"]+)"', first)
    assert following, first
    second = browser_client.get(following.group(1).replace("&amp;", "&")).text
    assert second.count('class="proposal') == 2
    assert f'id="proposal-{archived[0]}"' in second
    supersedes = browser_client.get("/review", params={"action": "supersede"}).text
    assert supersedes.count('class="proposal') == 1 and "Runs 5K in 25:50" in supersedes
    assert "Older" in supersedes and "Newer" in supersedes
    preferences = browser_client.get("/review", params={"type": "preference"}).text
    assert preferences.count('class="proposal') == 1
    facts_only = browser_client.get("/review", params={"type": "fact", "action": ""}).text
    assert facts_only.count('class="proposal') == 20
    bogus = browser_client.get("/review", params={"action": "delete"})
    assert bogus.status_code == 422
    # A stale proposal posted without JavaScript: the list again, the error on its card.
    post(client, f"/v1/memories/{older['id']}/versions", {"content": "Runs 5K in 24:00"}, headers)
    stale = browser_client.post(f"/review/proposals/{pair}/apply", data={"csrf": csrf})
    assert stale.status_code == 409
    card = stale.text.split(f'id="proposal-{pair}"', 1)[1].split("</article>", 1)[0]
    assert 'data-problem="stale-proposal"' in card
    # A rejection needs a reason: refused as invalid, shown on the card, nothing decided.
    blank = browser_client.post(
        f"/review/proposals/{archived[-1]}/reject",
        data={"csrf": csrf, "reason": " "},
        headers={"HX-Request": "true"},
    )
    assert blank.status_code == 422 and 'data-problem="validation-error"' in blank.text
    assert blank.text.lstrip().startswith("<article")
    assert _proposal(client, tenant, archived[-1])["status"] == "proposed"


def test_the_collapse_guard_and_a_closed_proposal_are_shown_on_the_card(
    browser_client: TestClient,
    client: TestClient,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a guard that allows no archival today without an administrator's confirmation
    monkeypatch.setenv("PALIMPSEST_COLLAPSE_SHARE", "0")
    monkeypatch.setenv("PALIMPSEST_COLLAPSE_MINIMUM", "0")
    memory = remember(client, tenant.headers(), content="Uses Subversion")
    proposal = _propose(client, tenant, memory_id=memory["id"], action="archive")
    path = f"/review/proposals/{proposal}/apply"
    htmx = {"HX-Request": "true"}
    csrf = _sign_in(browser_client, tenant.token("writer"))
    guarded = browser_client.post(path, data={"csrf": csrf, "reason": "gone"}, headers=htmx)
    assert guarded.status_code == 409 and 'data-problem="collapse-guard"' in guarded.text
    assert 'value="gone"' in guarded.text  # what was typed is kept
    assert 'name="confirm_bulk"' not in guarded.text  # a writer cannot confirm
    # When an administrator confirms past the guard on the page
    browser_client.cookies.clear()
    admin = _sign_in(browser_client, tenant.admin.token)
    assert 'name="confirm_bulk"' in browser_client.get("/review").text
    confirmed = browser_client.post(
        path, data={"csrf": admin, "reason": "gone", "confirm_bulk": "yes"}, headers=htmx
    )
    assert confirmed.status_code == 200 and "<article" not in confirmed.text
    assert 'hx-swap-oob="true"' in confirmed.text
    assert _proposal(client, tenant, proposal)["status"] == "applied"
    # Then deciding it again (another tab) shows it closed, with no controls left
    again = browser_client.post(path, data={"csrf": admin}, headers=htmx)
    assert again.status_code == 409 and 'data-problem="proposal-closed"' in again.text
    assert "/apply" not in again.text and "applied" in again.text


# The browser ------------------------------------------------------------------------


def _playwright() -> Any:
    """Return ``sync_playwright``, or skip (locally; in CI the browser must be there)."""
    missing = None
    if not CHROMIUM.exists():
        missing = "Debian's chromium is not installed at /usr/bin/chromium (.ci/run installs it)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[test]')"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return sync_playwright


def _sign_in_in(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/review")
    assert page.url == f"{base}/review/sign-in"  # signed out: sent to sign in
    page.fill("#token", token)
    page.click("form button[type=submit]")
    page.wait_for_url(f"{base}/review")


def _problem(message: Any) -> bool:
    """Whether a console message is a script error or a CSP refusal (an answer's
    status, 4xx included, is logged as an error too, and is not one)."""
    return bool(message.type == "error" and not message.text.startswith("Failed to load"))


_FETCH_WITHOUT_CSRF = """async ([path, csrf]) => {
    const body = new URLSearchParams({reason: "scripted"});
    if (csrf) body.set("csrf", csrf);
    const answer = await fetch(path, {method: "POST", body, redirect: "manual"});
    return [answer.status, await answer.text()];
}"""


def _given_proposals(client: TestClient, tenant: Tenant) -> dict[str, Any]:
    """Proposals an operator recorded: two archives, a supersede, two conflicts, one
    whose memory will change while the page is open, one about hostile markup."""
    headers = tenant.headers()

    def memory(content: str, kind: str = "fact") -> str:
        return str(remember(client, headers, type=kind, content=content)["id"])

    ids: dict[str, Any] = {
        "jenkins": memory("CI runs on Jenkins"),
        "jazz": memory("Likes jazz on Fridays", "preference"),
        "leeds": memory("The office is in Leeds"),
        "sprint": memory("Sprints last two weeks", "decision"),
    }
    york = memory("The office moved to York")
    hostile = memory('<img src=x onerror="window.pwned=1">Prefers <b>tea</b>', "preference")
    ids["archive"] = _propose(
        client, tenant, memory_id=ids["jenkins"], action="archive", note="moved to GitHub Actions"
    )
    ids["reject"] = _propose(
        client, tenant, memory_id=ids["jazz"], action="archive", confidence=0.93
    )
    ids["supersede"] = _propose(
        client,
        tenant,
        memory_id=memory("Runs 5K in 27:12"),
        action="supersede",
        related_memory_id=memory("Runs 5K in 25:50"),
        note="a newer time",
    )
    ids["conflict"] = _propose(
        client,
        tenant,
        memory_id=ids["leeds"],
        action="conflict",
        related_memory_id=york,
        confidence=0.88,
    )
    ids["stale"] = _propose(client, tenant, memory_id=ids["sprint"], action="archive")
    ids["escaped"] = _propose(client, tenant, memory_id=hostile, action="archive", confidence=0.91)
    ids["undecided"] = _propose(
        client,
        tenant,
        memory_id=memory("Stand-up is at 9:30", "decision"),
        action="conflict",
        related_memory_id=memory("Stand-up is at 10:00", "decision"),
        confidence=0.81,
        note="both cannot hold",
    )
    return ids


def _review_as_writer(page: Any, client: TestClient, tenant: Tenant, ids: dict[str, Any]) -> None:
    """Apply one, reject one, resolve a conflict; meet a stale one; try a forged post."""
    navigations: list[str] = []
    page.on("framenavigated", lambda f: navigations.append(f.url) if f == page.main_frame else None)
    page.evaluate("window.reviewMarker = 'still here'")
    card = page.locator(f"#proposal-{ids['archive']}")
    assert "CI runs on Jenkins" in card.inner_text()
    assert "moved to GitHub Actions" in card.inner_text() and "97%" in card.inner_text()
    # It applies one (an archive) with a reason, and rejects one with a reason
    card.locator("form.apply input[name=reason]").fill("we left Jenkins in May")
    card.locator("button.apply").click()
    card.wait_for(state="detached")
    assert "Applied proposal" in page.locator("#flash").inner_text()
    rejected = page.locator(f"#proposal-{ids['reject']}")
    rejected.locator("form.reject input[name=reason]").fill("still true")
    rejected.locator("button.reject").click()
    rejected.wait_for(state="detached")
    # and resolves a conflict inline by archiving the older side
    resolved = page.locator(f"#proposal-{ids['conflict']}")
    assert "The office moved to York" in resolved.inner_text()
    resolved.locator("input[value=archive_older]").check()
    resolved.locator("button.apply").click()
    resolved.wait_for(state="detached")
    # Each left the list without a navigation: the page's own state survived
    assert navigations == []
    assert page.evaluate("window.reviewMarker") == "still here"
    # A proposal whose memory changed since the page loaded shows the error on its card
    post(client, f"/v1/memories/{ids['sprint']}/versions", {"content": "Three"}, tenant.headers())
    changed = page.locator(f"#proposal-{ids['stale']}")
    changed.locator("button.apply").click()
    changed.locator('.error[data-problem="stale-proposal"]').wait_for()
    assert navigations == []
    # Content is text, never markup that runs
    shown = page.locator(f"#proposal-{ids['escaped']} .content").inner_text()
    assert shown == '<img src=x onerror="window.pwned=1">Prefers <b>tea</b>'
    assert page.evaluate("window.pwned") is None
    # A script of this origin that lacks the form's CSRF token is refused
    status, text = page.evaluate(
        _FETCH_WITHOUT_CSRF, [f"/review/proposals/{ids['escaped']}/apply", None]
    )
    assert status == 403 and 'data-problem="forbidden"' in text


def _review_as_reader(page: Any, ids: dict[str, Any]) -> None:
    """A reader sees the proposals but no controls, and a post is refused."""
    assert page.locator(f"#proposal-{ids['escaped']}").count() == 1
    assert page.locator("form.apply, form.reject").count() == 0
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    status, text = page.evaluate(
        _FETCH_WITHOUT_CSRF, [f"/review/proposals/{ids['escaped']}/apply", csrf]
    )
    assert status == 403 and 'data-problem="forbidden"' in text


def _decision(client: TestClient, tenant: Tenant, proposal: str, status: str) -> dict[str, Any]:
    record = _proposal(client, tenant, proposal)
    assert record["status"] == status
    response = client.get(f"/v1/decisions/{record['decision_id']}", headers=tenant.headers())
    assert response.status_code == 200, response.text
    decision: dict[str, Any] = response.json()
    return decision


def _archived(client: TestClient, tenant: Tenant, memory_id: str) -> Any:
    response = client.get(f"/v1/memories/{memory_id}", headers=tenant.headers())
    return response.json()["belief"]["labels"]["archived"]


@pytest.mark.slow
def test_a_person_reviews_proposals_in_a_real_browser(
    client: TestClient, runtime: Runtime, tenant: Tenant, tmp_path: Path
) -> None:
    sync_playwright = _playwright()
    ids = _given_proposals(client, tenant)
    app = create_app(ApiSettings(), runtime)
    with live_server(app) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            problems: list[str] = []  # CSP refusals and script errors land here
            page.on("console", lambda m: problems.append(m.text) if _problem(m) else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            # When a writer signs in through the page and reviews
            _sign_in_in(page, base, tenant.token("writer", "Ada Reviewer"))
            _review_as_writer(page, client, tenant, ids)
            update = os.environ.get("PALIMPSEST_UPDATE_SCREENSHOT") == "1"
            shot = SCREENSHOT if update else tmp_path / SCREENSHOT.name
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 0
            assert problems == []
            reader = browser.new_context().new_page()
            _sign_in_in(reader, base, tenant.token("reader"))
            _review_as_reader(reader, ids)
        finally:
            browser.close()
    # Then the log holds each decision with the reviewer's reason
    applied = _decision(client, tenant, ids["archive"], "applied")
    assert applied["kind"] == "apply_proposal" and applied["reason"] == "we left Jenkins in May"
    rejected = _decision(client, tenant, ids["reject"], "rejected")
    assert rejected["kind"] == "reject_proposal" and rejected["reason"] == "still true"
    resolved = _decision(client, tenant, ids["conflict"], "applied")
    assert resolved["params"] == {"resolution": "archive_older"}
    drain_until_caught_up(runtime)
    archived = _archived(client, tenant, ids["jenkins"])
    assert archived["reason"] == f"proposal {ids['archive']}: we left Jenkins in May"
    assert _archived(client, tenant, ids["leeds"]) is not None
    assert _archived(client, tenant, ids["jazz"]) is None
    # and the list what is left: the stale one, the refused post's, and the untouched
    listed = client.get("/v1/proposals", headers=tenant.headers()).json()["items"]
    left = {ids[k] for k in ("supersede", "stale", "escaped", "undecided")}
    assert {p["id"] for p in listed} == left
