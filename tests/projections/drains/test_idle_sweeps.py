"""An idle store sweeps in O(1): the drains and /metrics read only tenants with work
due, whatever the number of tenants that have ever written.

Statements are counted at the driver (every ``execute`` of every psycopg cursor
in this process), on a store of the test's own, settled (nothing due), with
few tenants and with many: the count must not grow with the tenants.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.drains._expiry import expire_due
from palimpsest.projections.drains._retention import apply_retention
from palimpsest.projections.drains._tenant_erasure import erase_deleted_tenants
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store import tenancy
from palimpsest.projections.store.queued import send_queued
from palimpsest.projections.views.revision_status import revision_totals
from tests.api.helpers import post
from tests.conftest import fresh_database

FEW = 20
MANY = int(os.environ.get("PALIMPSEST_IDLE_TENANTS", "300"))
"""Tenants in the store when sweeps are counted. Creating them is what takes time
(2,000 took 2 minutes on a 2-core machine, 10,000 took 22, with the same counts), so the
default run uses 300; set ``PALIMPSEST_IDLE_TENANTS`` for more."""


class _HashEmbedder:
    """A stand-in model: deterministic unit vectors, no download (the sweep's cost is
    what is measured, not the model's)."""

    model_id = "test-hash-384"
    dimension = 384

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            seed = hashlib.sha256(text.encode()).digest()
            raw = [float(seed[i % len(seed)] - 128) + i % 7 for i in range(self.dimension)]
            norm = math.sqrt(sum(x * x for x in raw))
            vectors.append([x / norm for x in raw])
        return vectors


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with fresh_database(tmp_path_factory) as database:
        own = start_runtime(database.settings)
        own.use_embedder(_HashEmbedder())
        yield own
        own.close()


def _statements(monkeypatch: pytest.MonkeyPatch, work: Callable[[], object]) -> int:
    """Return how many statements ``work`` sent to the database: through psycopg's
    cursors, and queued (:func:`~palimpsest.projections.store.tenancy.queued_transaction`; each
    transaction's own setting of its tenant not counted)."""
    sent = {"n": 0}
    real = psycopg.Cursor.execute

    def counting(self: psycopg.Cursor[Any], *args: Any, **kwargs: Any) -> Any:
        sent["n"] += 1
        return real(self, *args, **kwargs)

    def counting_queued(conn: psycopg.Connection[Any], queued: Any, **kwargs: Any) -> Any:
        sent["n"] += len(queued) - 1
        return send_queued(conn, queued, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counting)
        patch.setattr(tenancy, "send_queued", counting_queued)
        work()
    return sent["n"]


def _populate(runtime: Runtime, client: TestClient, start: int, stop: int) -> None:
    """Create tenants ``start`` to ``stop``, each with an observation and a memory."""
    for i in range(start, stop):
        admin = create_tenant(runtime.log, f"idle-{i}")
        items = [
            {"op": "create_observation", "content": f"tenant {i} said something"},
            {"op": "create_memory", "type": "note", "scope": "s", "content": f"note {i}"},
        ]
        headers = {"Authorization": f"Bearer {admin.token}"}
        assert post(client, "/v1/batch", {"items": items}, headers).status_code == 201


def _settle(runtime: Runtime, loop: DrainLoop) -> None:
    """Run passes until one finds nothing to do (the first looks at every tenant), then
    move the last publishes a minute back: idle is a minute with nothing published
    (metrics report the last minute's throughput), backdated rather than waited for."""
    loop.run_once(first=True)
    for _ in range(10):
        loop.run_once()
    totals = revision_totals(loop.log)
    assert totals["dirty_memories"] == totals["unindexed_memories"] == 0
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        conn.execute(
            f"UPDATE \"{schema}\".index_tenants SET published_at = published_at - interval '61 s'"
        )
        conn.commit()


def _public_sweep(runtime: Runtime) -> None:
    """One sweep through the drains' public entry points (as tests and tools call them)."""
    now = datetime.now(UTC)
    apply_retention(runtime.log, now=now)
    expire_due(runtime.log, now=now)
    erase_deleted_tenants(runtime.log)
    drain_revisions(runtime.log)


@pytest.mark.slow
def test_an_idle_sweep_costs_the_same_with_few_tenants_and_many(
    store: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = TestClient(create_app(ApiSettings(), store))
    loop = DrainLoop(store.log, embedder=store.embedder)
    counted: dict[int, tuple[int, int, int]] = {}
    created = 0
    for tenants in (FEW, MANY):
        _populate(store, client, created, tenants)
        created = tenants
        _settle(store, loop)
        counted[tenants] = (
            _statements(monkeypatch, loop.run_once),
            _statements(monkeypatch, lambda: _public_sweep(store)),
            _statements(monkeypatch, lambda: client.get("/metrics")),
        )
    # The same count with 100 times the tenants, and a handful of statements: a pass
    # reads every stage's due tenants in one (indexing in one more, after revisions),
    # the public entry points one each, and the metrics one.
    assert counted[MANY] == counted[FEW], counted
    loop_pass, public_sweep, metrics = counted[MANY]
    assert loop_pass <= 2 and public_sweep <= 4 and metrics <= 2, counted
