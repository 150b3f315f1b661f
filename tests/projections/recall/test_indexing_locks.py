"""Indexing drains writing the same memories at once never deadlock (issue 17).

Two parallel indexing transactions once locked ``revisions`` rows in no
particular order and deadlocked under fuzzing. Here real threads race
``_write`` over the same memories, each in its own order, many times.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.recall.indexing import _contents, _due, _write
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import remember
from tests.conftest import Tenant, drain_until_caught_up

MEMORIES = 40
TRIALS = 40


def _make_due_again(runtime: Runtime, tenant: Tenant) -> None:
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{schema}".revisions SET indexed = 0 WHERE tenant_id = %s', (tenant.id,)
        )


@pytest.mark.slow
def test_parallel_index_writes_of_the_same_memories_never_deadlock(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    for i in range(MEMORIES):
        remember(client, tenant.headers(), content=f"memory number {i} about lock order")
    drain_until_caught_up(runtime)
    log, embedder = runtime.log, runtime.embedder
    assert embedder is not None
    rows = _due(log, tenant.id, embedder.model_id, MEMORIES)
    assert len(rows) == MEMORIES
    contents = _contents(log, tenant.id, rows)
    ids = list(contents)
    vectors = dict(zip(ids, embedder.embed([contents[i] for i in ids]), strict=True))
    rng = random.Random(17)
    failures: list[BaseException] = []
    for _ in range(TRIALS):
        _make_due_again(runtime, tenant)
        orders = [rng.sample(rows, len(rows)) for _ in range(3)]
        start = threading.Barrier(len(orders))

        def write(order: list[dict[str, Any]], start: threading.Barrier = start) -> None:
            start.wait()
            try:
                _write(log, tenant.id, embedder, order, vectors)
            except BaseException as error:  # a deadlock is an OperationalError
                failures.append(error)

        threads = [threading.Thread(target=write, args=(order,)) for order in orders]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert failures == []
    # Every memory ended indexed at its published revision
    assert _due(log, tenant.id, embedder.model_id, MEMORIES) == []
