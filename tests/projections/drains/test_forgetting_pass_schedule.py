"""The daily forgetting pass's schedule never skips a day: a pass killed mid-run, or a
database error at the claim or during the pass, leaves the day to the next run.

A day is claimed for a lease, and marked done only when its pass finished over every
tenant; a claim not finished within its lease is claimed again by the next scheduled
run, which runs the day. Each test runs the schedule on a day of its own (the
claims are one row per day, for every tenant), far from the other tests' days.

The judge is the real client pointed at a loopback endpoint that refuses every request:
"the day's pass ran over the tenant" is "its report shows a batch sent to the judge"
(the store holds other tests' tenants, which the schedule passes over too).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.drains.forgetting_pass import PassReport, ScheduledPass
from palimpsest.projections.drains.settings import ForgettingPassSettings
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant
from tests.projections.drains.killing import drain_process, kill_mid_write
from tests.projections.drains.test_forgetting_pass import (
    RefusingEndpoint,
    _opt_in,
    _stale_memories,
    _writer,
)

LEASE = timedelta(minutes=30)
"""How long a claim of the day holds before another run may claim the day again."""
SETTINGS = ForgettingPassSettings(
    forgetting_pass_enabled=True,
    forgetting_pass_cron="30 4 * * *",
    forgetting_pass_lease_s=LEASE.total_seconds(),
)


@pytest.fixture
def judge() -> Iterator[RefusingEndpoint]:
    endpoint = RefusingEndpoint()
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def _scheduled(runtime: Runtime, judge: RefusingEndpoint) -> ScheduledPass:
    """The scheduled pass as a process runs it each minute."""
    return ScheduledPass(
        runtime.log, _writer(runtime), judge.judge, SETTINGS, lambda: runtime.embedder.model_id
    )


def _ran_over(reports: list[PassReport] | None, tenant: Tenant) -> bool:
    """Whether ``reports`` hold a pass that judged (or tried to judge) the tenant."""
    return any(r.tenant_id == tenant.id and r.batches > 0 for r in reports or [])


@contextmanager
def _failing(runtime: Runtime, table: str, when: str = "true") -> Iterator[None]:
    """Make every insert or update of ``table`` (for which ``when`` holds) fail in the
    database, as a statement refused by the server, until exit."""
    schema = f'"{runtime.database.schema}"'
    function: LiteralString = (
        "CREATE FUNCTION {schema}.injected_failure() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'injected: the statement failed'; END $$"
    )
    trigger = (
        f"CREATE TRIGGER injected_failure BEFORE INSERT OR UPDATE ON {schema}.{table}"
        f" FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION {schema}.injected_failure()"
    )
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(function.format(schema=schema))
        conn.execute(trigger.encode())
    try:
        yield
    finally:
        with runtime.database.owner_connection(autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER injected_failure ON {schema}.{table}".encode())
            conn.execute(f"DROP FUNCTION {schema}.injected_failure()".encode())


@pytest.mark.slow
def test_a_pass_killed_mid_run_is_run_again_once_its_lease_is_over(
    client: TestClient, tenant: Tenant, runtime: Runtime, judge: RefusingEndpoint
) -> None:
    # Given an opted-in tenant with memories to judge
    _stale_memories(client, tenant, runtime)
    _opt_in(client, tenant)
    at = datetime(2031, 1, 10, 4, 30, tzinfo=UTC)
    code = (
        "from datetime import datetime, timedelta\n"
        "from palimpsest.projections.commands.writer import CapturePolicy, Writer\n"
        "from palimpsest.projections.drains.forgetting_pass import ScheduledPass\n"
        "from palimpsest.projections.drains.settings import ForgettingPassSettings\n"
        "from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge\n"
        "w = Writer(log, CapturePolicy(timedelta(days=1), timedelta(days=1)), clock=datetime.now)\n"
        "s = ForgettingPassSettings(forgetting_pass_enabled=True,"
        f" forgetting_pass_cron='30 4 * * *', forgetting_pass_lease_s={LEASE.total_seconds()})\n"
        f"j = OpenAICompatibleJudge({judge.judge.base_url!r}, 'no-model', retries=0)\n"
        f"ScheduledPass(log, w, j, s, lambda: {runtime.embedder.model_id!r})"
        f"(datetime.fromisoformat({at.isoformat()!r}))\n"
    )

    # When the process running the day's pass is killed in the middle of it (inside the
    # tenant's pass, reserving its first judge call)
    kill_mid_write(
        runtime,
        tenant.id,
        start=lambda: drain_process(runtime, code),
        hold="INSERT INTO {schema}.judge_usage (tenant_id, day) VALUES (%s, %s) RETURNING day",
        params=(tenant.id, at.date()),
        table="judge_usage",
        holds_events_lock=False,
    )

    # Then the next scheduled runs leave the day to it while its lease lasts, and
    # run the day once the lease is over; the day is done after that
    scheduled = _scheduled(runtime, judge)
    assert scheduled(at + timedelta(minutes=10)) is None
    assert _ran_over(scheduled(at + LEASE + timedelta(minutes=1)), tenant)
    assert scheduled(at + LEASE + timedelta(minutes=2)) is None
    assert _scheduled(runtime, judge)(at + 2 * LEASE + timedelta(minutes=3)) is None


def test_a_database_error_at_the_claim_leaves_the_day_to_the_next_run(
    client: TestClient, tenant: Tenant, runtime: Runtime, judge: RefusingEndpoint
) -> None:
    _stale_memories(client, tenant, runtime)
    _opt_in(client, tenant)
    at = datetime(2031, 1, 11, 4, 30, tzinfo=UTC)
    scheduled = _scheduled(runtime, judge)

    # When the database refuses the day's claim at 04:30
    with _failing(runtime, "forgetting_runs"), pytest.raises(Exception, match="injected"):
        scheduled(at)

    # Then the same process's next run, a minute later, claims and runs the day
    assert _ran_over(scheduled(at + timedelta(minutes=1)), tenant)
    assert scheduled(at + timedelta(minutes=2)) is None


@pytest.mark.slow
def test_a_database_error_during_the_pass_leaves_the_day_unfinished(
    client: TestClient, tenant: Tenant, runtime: Runtime, judge: RefusingEndpoint, caplog: Any
) -> None:
    _stale_memories(client, tenant, runtime)
    _opt_in(client, tenant)
    at = datetime(2031, 1, 12, 4, 30, tzinfo=UTC)
    scheduled = _scheduled(runtime, judge)

    # When the database fails the tenant's pass (its budget's statement) at 04:30
    with _failing(runtime, "judge_usage", f"NEW.tenant_id = '{tenant.id}'"):
        first = scheduled(at)
    assert not _ran_over(first, tenant)
    assert "forgetting pass failed" in caplog.text

    # Then the day is not done: the next run once the claim's lease is over runs it
    assert scheduled(at + timedelta(minutes=10)) is None
    assert _ran_over(scheduled(at + LEASE + timedelta(minutes=1)), tenant)
    assert scheduled(at + LEASE + timedelta(minutes=2)) is None
