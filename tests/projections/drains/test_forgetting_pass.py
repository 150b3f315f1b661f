"""The forgetting pass's gates: no fallback, the opt-in, the daily budget, the schedule.

The judge here is the real OpenAI-compatible client pointed at a loopback
endpoint that counts every request and refuses it (HTTP 404, not retried):
"the pass called no judge" is checked as "the endpoint got no request".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.cli import main
from palimpsest.domain.judge_state import JudgeItem
from palimpsest.domain.verdicts import Verdict
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.forgetting_pass import ScheduledPass, claim_day, run_pass
from palimpsest.projections.drains.judge_budget import record, release, reserve, usage_on
from palimpsest.projections.drains.settings import ForgettingPassSettings
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment.judge import ItemFailure, JudgeUsage
from palimpsest.projections.recall.pass_candidates import PassSettings
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import remember
from tests.api.live_server import live_server
from tests.conftest import Tenant, index_until_caught_up

NOW = datetime(2026, 10, 26, 4, 30, tzinfo=UTC)


class RefusingEndpoint:
    """A chat-completions endpoint on loopback that counts requests and refuses each."""

    def __init__(self) -> None:
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests += 1
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.judge = OpenAICompatibleJudge(
            f"http://127.0.0.1:{self.server.server_port}", "no-model", timeout_s=5, retries=0
        )


@pytest.fixture
def silent_judge() -> Iterator[RefusingEndpoint]:
    endpoint = RefusingEndpoint()
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def _writer(runtime: Runtime) -> Writer:
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    return Writer(runtime.log, policy, clock=lambda: NOW)


def _stale_memories(client: TestClient, tenant: Tenant, runtime: Runtime) -> None:
    """Two old preferences about one thing: a stale single and a pair to judge."""
    for text, when in (
        ("I run 5K in 27:12, my personal best.", "2023-05-25T20:21:00Z"),
        ("My new 5K personal best is 25:50.", "2023-05-27T10:00:00Z"),
    ):
        observation = client.post(
            "/v1/observations",
            json={"content": text, "captured_at": when},
            headers=tenant.headers(),
        ).json()["id"]
        remember(
            client,
            tenant.headers(),
            type="preference",
            content=text,
            evidence=[{"observation_id": observation, "start": 0, "end": len(text)}],
        )
    index_until_caught_up(runtime, tenant.id)


def _pass(runtime: Runtime, tenant: Tenant, judge: Any, **kwargs: Any) -> Any:
    return run_pass(
        runtime.log,
        _writer(runtime),
        tenant.id,
        judge,
        now=NOW,
        candidates=PassSettings(),
        proposals=ProposalSettings(),
        model_id=runtime.embedder.model_id,
        **kwargs,
    )


def _opt_in(client: TestClient, tenant: Tenant, **policy: Any) -> Any:
    body = {"enabled": True, "daily_calls": 10, "daily_tokens": 100_000, **policy}
    response = client.put("/v1/tenant/judgment", json=body, headers=tenant.headers())
    assert response.status_code == 200, response.text
    return response.json()


def test_a_tenant_that_did_not_opt_in_gets_no_pass_at_all(
    client: TestClient, tenant: Tenant, runtime: Runtime, silent_judge: RefusingEndpoint
) -> None:
    _stale_memories(client, tenant, runtime)
    report = _pass(runtime, tenant, silent_judge.judge)
    assert report.stopped == "not-opted-in"
    assert (report.items, report.calls) == (0, 0)
    assert silent_judge.requests == 0
    assert (
        client.get("/v1/proposals?status=dismissed", headers=tenant.headers()).json()["items"] == []
    )


def test_the_opt_in_is_read_before_every_send(
    client: TestClient, tenant: Tenant, runtime: Runtime, silent_judge: RefusingEndpoint
) -> None:
    _stale_memories(client, tenant, runtime)
    _opt_in(client, tenant)
    dry = _pass(runtime, tenant, silent_judge.judge, dry_run=True)
    assert dry.items >= 1 and dry.batches >= 1 and silent_judge.requests == 0
    # Opted out between selection and the send: the pass stops before calling
    _opt_in(client, tenant, enabled=False)
    assert _pass(runtime, tenant, silent_judge.judge).stopped == "not-opted-in"
    assert silent_judge.requests == 0


def test_a_failed_call_gives_its_reservation_back(
    client: TestClient, tenant: Tenant, runtime: Runtime, silent_judge: RefusingEndpoint
) -> None:
    _stale_memories(client, tenant, runtime)
    _opt_in(client, tenant)
    report = _pass(runtime, tenant, silent_judge.judge)
    assert report.stopped == "judge-unavailable"
    assert silent_judge.requests == 1  # it did send, and the server refused
    assert usage_on(runtime.log, tenant.id, NOW.date()) == (0, 0)
    judgment = client.get("/v1/tenant/judgment", headers=tenant.headers("reader")).json()
    assert judgment["enabled"] is True and judgment["daily_calls"] == 10


def test_a_spent_budget_stops_the_pass_before_it_sends(
    client: TestClient, tenant: Tenant, runtime: Runtime, silent_judge: RefusingEndpoint
) -> None:
    _stale_memories(client, tenant, runtime)
    _opt_in(client, tenant, daily_calls=0)
    assert _pass(runtime, tenant, silent_judge.judge).stopped == "budget"
    _opt_in(client, tenant, daily_calls=5, daily_tokens=10)  # too few tokens for one call
    assert _pass(runtime, tenant, silent_judge.judge).stopped == "budget"
    assert silent_judge.requests == 0
    metrics = client.get("/metrics").text
    assert 'palimpsest_judge_budget_refusals_total{operation="memory.forget.decide"}' in metrics


def test_concurrent_reservations_never_pass_the_cap(tenant: Tenant, runtime: Runtime) -> None:
    day = date(2026, 10, 26)
    granted: list[Any] = []
    start = threading.Barrier(12)

    def take() -> None:
        start.wait()
        got = reserve(runtime.log, tenant.id, day, tokens=100, daily_calls=5, daily_tokens=10_000)
        if got is not None:
            granted.append(got)

    threads = [threading.Thread(target=take) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 5
    assert usage_on(runtime.log, tenant.id, day) == (5, 500)
    record(runtime.log, granted[0], calls=2, prompt=30, completion=5)
    release(runtime.log, granted[1])
    # Corrected to what the server reported (2 requests, 35 tokens); one given back
    assert usage_on(runtime.log, tenant.id, day) == (5, 335)


@pytest.mark.slow
def test_the_schedule_claims_each_day_once_and_is_a_no_op_when_off(
    runtime: Runtime, tenant: Tenant, silent_judge: RefusingEndpoint, monkeypatch: Any
) -> None:
    judge = silent_judge.judge
    off = ScheduledPass(runtime.log, _writer(runtime), judge, ForgettingPassSettings(), lambda: "m")
    assert off(NOW) is None  # off: nothing read, nothing claimed
    monkeypatch.setenv("PALIMPSEST_FORGETTING_PASS_ENABLED", "true")
    monkeypatch.setenv("PALIMPSEST_FORGETTING_PASS_CRON", "45 4 * * *")
    settings = ForgettingPassSettings()
    first = ScheduledPass(runtime.log, _writer(runtime), judge, settings, lambda: "m")
    other = ScheduledPass(runtime.log, _writer(runtime), judge, settings, lambda: "m")
    # 04:30 is before 04:45: the run due is the day before's
    reports = first(NOW)
    assert reports is not None  # every tenant of the store was looked at
    assert {r.tenant_id: r.stopped for r in reports}[tenant.id] == "not-opted-in"
    assert other(NOW) is None  # another process: that day is claimed
    assert first(NOW + timedelta(minutes=10)) is None  # 04:40: still that day's, done
    assert other(NOW + timedelta(minutes=20)) is not None  # 04:50: the new day's run
    assert first(NOW + timedelta(minutes=25)) is None  # claimed by the other
    later, lease = NOW + timedelta(days=1), settings.lease
    assert claim_day(runtime.log, date(2026, 10, 26), now=later, lease=lease) == "finished"
    assert claim_day(runtime.log, date(2026, 10, 27), now=later, lease=lease) == "claimed"
    assert claim_day(runtime.log, date(2026, 10, 27), now=later, lease=lease) == "held"


def test_the_one_shot_says_the_service_runs_no_pass_and_exits_0(
    runtime: Runtime, tenant: Tenant, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.delenv("PALIMPSEST_FORGETTING_PASS_ENABLED", raising=False)
    monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.admin.token)
    with live_server(create_app(ApiSettings(), runtime)) as base:
        assert main(["forgetting-pass", "--url", base]) == 0
    assert "PALIMPSEST_FORGETTING_PASS_ENABLED" in capsys.readouterr().err


def test_a_deployment_without_a_pass_answers_409_and_judges_nothing(
    client: TestClient, tenant: Tenant
) -> None:
    response = client.post("/v1/forgetting/runs", json={}, headers=tenant.headers())
    assert response.status_code == 409
    assert response.json()["type"].endswith(":pass-disabled")
    reader = client.post("/v1/forgetting/runs", json={}, headers=tenant.headers("writer"))
    assert reader.status_code == 403


class _OptingOut:
    """A judge that answers no item (each fails) and, during its first call, has an
    administrator opt the tenant out: the pass must not send a second batch."""

    model = "none"
    usage = JudgeUsage(calls=1)

    def __init__(self, client: TestClient, tenant: Tenant) -> None:
        self.client, self.tenant, self.calls = client, tenant, 0

    def batches(self, now: datetime, items: Sequence[JudgeItem]) -> list[list[JudgeItem]]:
        return [[item] for item in items]  # one request per item

    def judge(self, now: datetime, items: Sequence[JudgeItem]) -> list[Verdict | ItemFailure]:
        self.calls += 1
        if self.calls == 1:
            _opt_in(self.client, self.tenant, enabled=False)
        return [ItemFailure(item.ref, "no answer") for item in items]


def test_an_opt_out_during_a_pass_stops_it_at_the_next_send(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    _stale_memories(client, tenant, runtime)
    _opt_in(client, tenant)
    judge = _OptingOut(client, tenant)
    report = _pass(runtime, tenant, judge)
    assert report.batches >= 2
    assert (judge.calls, report.failed, report.stopped) == (1, 1, "opted-out")


def test_the_one_shot_runs_the_pass_through_the_running_service(
    runtime: Runtime,
    tenant: Tenant,
    silent_judge: RefusingEndpoint,
    monkeypatch: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PALIMPSEST_FORGETTING_PASS_ENABLED", "true")
    monkeypatch.setenv("PALIMPSEST_JUDGE", "openai")
    monkeypatch.setenv("PALIMPSEST_JUDGE_URL", silent_judge.judge.base_url)
    monkeypatch.setenv("PALIMPSEST_JUDGE_MODEL", "no-model")
    monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.admin.token)
    app = create_app(ApiSettings(), runtime)
    with live_server(app) as base:
        capsys.readouterr()
        assert main(["forgetting-pass", "--url", base, "--tenant", "someone-else"]) == 2
        assert "not 'someone-else''s" in capsys.readouterr().err
        assert main(["forgetting-pass", "--url", base, "--tenant", str(tenant.id)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["stopped"] == "not-opted-in" and report["calls"] == 0
        monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.token("writer"))
        assert main(["forgetting-pass", "--url", base]) == 1  # a writer may not run it
    assert silent_judge.requests == 0
