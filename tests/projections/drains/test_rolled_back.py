"""A publish that PostgreSQL rolls back (a deadlock, SQLSTATE 40P01) is tried again
at once: the tenant's readers are not left ``pending`` for the batch's lease and the
drain's backoff (seconds to minutes)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.drains.isolation import Backoff
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.rollbacks import ROLLBACK_ATTEMPTS
from tests.api.helpers import remember
from tests.conftest import Tenant

Refuse = Callable[[int], Callable[[], int]]


@pytest.fixture
def refuse_publishes(runtime: Runtime, tenant: Tenant) -> Iterator[Refuse]:
    """Return ``refuse(n)``: make PostgreSQL itself fail the next ``n`` publishes of the
    tenant's revisions as it fails a deadlocked transaction (a trigger raising 40P01);
    it returns what reports how many it refused. Removed after the test."""
    schema, name = runtime.database.schema, f"deadlock_{uuid.uuid4().hex[:8]}"

    def refuse(n: int) -> Callable[[], int]:
        with runtime.database.owner_connection() as conn:
            # A sequence counts the refusals: unlike a row, it survives the rollback.
            conn.execute(f'CREATE SEQUENCE "{schema}".{name}')
            conn.execute(
                f'CREATE FUNCTION "{schema}".{name}() RETURNS trigger LANGUAGE plpgsql'
                " SECURITY DEFINER AS $$"
                f" BEGIN IF NEW.tenant_id = '{tenant.id}'::uuid"
                f" AND nextval('\"{schema}\".{name}') <= {n} THEN"
                " RAISE EXCEPTION 'deadlock detected' USING ERRCODE = 'deadlock_detected';"
                " END IF; RETURN NEW; END $$"
            )
            conn.execute(
                f'CREATE TRIGGER {name} BEFORE UPDATE OF published ON "{schema}".revisions'
                f' FOR EACH ROW EXECUTE FUNCTION "{schema}".{name}()'
            )
            conn.commit()

        def refused() -> int:
            with runtime.database.owner_connection() as conn:
                row = conn.execute(
                    f'SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM "{schema}".{name}'
                ).fetchone()
            assert row is not None
            return min(int(row[0]), n)

        return refused

    yield refuse
    with runtime.database.owner_connection() as conn:
        conn.execute(f'DROP TRIGGER IF EXISTS {name} ON "{schema}".revisions')
        conn.execute(f'DROP FUNCTION IF EXISTS "{schema}".{name}()')
        conn.execute(f'DROP SEQUENCE IF EXISTS "{schema}".{name}')
        conn.commit()


OnePass = Callable[[int], tuple[str, int]]


@pytest.fixture
def one_pass(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    refuse_publishes: Refuse,
    caplog: pytest.LogCaptureFixture,
) -> OnePass:
    """Return ``run(refusals)``: write a memory, have PostgreSQL roll back its next
    ``refusals`` publishes, run one drain pass; return the memory's status after it,
    and how many publishes were refused."""

    def run(refusals: int) -> tuple[str, int]:
        headers = tenant.headers()
        created = remember(client, headers, content=f"published after {refusals} deadlocks")
        refused = refuse_publishes(refusals)
        # A failure is retried only after an hour: the test sees a retry at once or none.
        loop = DrainLoop(runtime.log, backoff=Backoff(base_s=3600, max_s=3600))
        with caplog.at_level(logging.WARNING):
            loop.run_once()
        read = client.get(f"/v1/memories/{created['id']}", headers=headers).json()
        return str(read["status"]), refused()

    return run


def test_a_publish_rolled_back_by_a_deadlock_is_retried_in_the_same_pass(
    one_pass: OnePass, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a new memory, and PostgreSQL rolling back the next two publishes of it,
    # when one drain pass runs
    status, refused = one_pass(ROLLBACK_ATTEMPTS - 1)
    # Then the memory is current at once, after two refusals
    assert status == "current"
    assert refused == ROLLBACK_ATTEMPTS - 1
    # And each retry is one structured line naming the SQLSTATE; no stage failed
    retries = [r for r in caplog.records if r.__dict__.get("sqlstate") == "40P01"]
    assert [(r.__dict__["work"], r.__dict__["attempt"]) for r in retries] == [
        ("publish", 1),
        ("publish", 2),
    ]
    assert not [r for r in caplog.records if r.getMessage() == "drain stage failed"]


def test_a_publish_the_database_keeps_rolling_back_fails_its_stage_after_bounded_tries(
    one_pass: OnePass, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a new memory, and PostgreSQL rolling back every publish of it, when one
    # drain pass runs
    status, refused = one_pass(100)
    # Then it tried a bounded number of times, and the stage's failure is logged for the
    # tenant (then backed off, as any failure); the memory is still pending
    assert refused == ROLLBACK_ATTEMPTS
    failed = [r for r in caplog.records if r.getMessage() == "drain stage failed"]
    assert [(r.__dict__["stage"], r.__dict__["tenant_id"]) for r in failed] == [
        ("revisions", str(tenant.id))
    ]
    assert status == "pending"
