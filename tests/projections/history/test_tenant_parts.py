"""A large tenant replayed in parts, side by side: exactly the rows of one replay.

The store is the module's own, so that its largest tenant holds more than a worker's
share of it (rebuild splits only such a tenant): a varied tenant (``_populate``:
every read-model table holds rows) with edges between memories of different parts,
and a small one beside it.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.history._replay_mapper import replay_mapper
from palimpsest.projections.history.log_scan import log_head, replay_tenant
from palimpsest.projections.history.rebuild import rebuild
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.views.read_model_parts import TenantPart
from palimpsest.projections.views.read_models import TABLES, TenantReadModels
from tests.api.helpers import post, remember
from tests.api.poison_rows import insert_event, insert_poison
from tests.conftest import Tenant, drain_until_caught_up, fresh_database
from tests.projections.history.test_rebuild_verify import _populate

WHOLE = 2**62
"""A ``split_from`` no tenant reaches: every tenant replayed whole."""


@dataclass(frozen=True)
class Store:
    runtime: Runtime
    client: TestClient
    big: Tenant
    small: Tenant


def _edge_across(client: TestClient, tenant: Tenant, count: int) -> None:
    """Add an edge from a new memory to one in another of ``count`` parts."""
    source = UUID(remember(client, tenant.headers(), content="a source")["id"])
    while True:
        target = UUID(remember(client, tenant.headers(), content="a target")["id"])
        if target.bytes[15] % count != source.bytes[15] % count:
            break
    body = {"kind": "extends", "target_id": str(target)}
    added = post(client, f"/v1/memories/{source}/edges", body, tenant.headers())
    assert added.status_code == 201, added.text


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, runtime: Runtime) -> Iterator[Store]:
    with fresh_database(tmp_path_factory) as database:
        own = start_runtime(database.settings)
        own.use_embedder(runtime.embedder)  # the session's model, loaded once
        try:
            with TestClient(create_app(ApiSettings(), own)) as client:
                big = Tenant(own, create_tenant(own.log, "big"))
                small = Tenant(own, create_tenant(own.log, "small"))
                _populate(client, big, random.Random(17), memories=20)
                for count in (2, 3):
                    _edge_across(client, big, count)
                remember(client, small.headers())
                drain_until_caught_up(own)
                yield Store(own, client, big, small)
        finally:
            own.close()


def _replayed(runtime: Runtime, tenant_id: UUID, parts: list[TenantPart | None], head: int) -> Any:
    schema = runtime.database.schema
    replayed = []
    with runtime.database.owner_connection(autocommit=True) as conn:
        for part in parts:
            with conn.transaction():
                models = TenantReadModels(tenant_id, part=part)
                replay_tenant(conn, schema, replay_mapper(), models, upto=head)
                replayed.append(models)
    return replayed


def _head(runtime: Runtime) -> int:
    with runtime.database.owner_connection() as conn, conn.cursor() as cur:
        return log_head(cur, runtime.database.schema)


@pytest.mark.parametrize("count", [2, 3])
def test_the_parts_replay_exactly_the_rows_of_one_replay_between_them(
    store: Store, count: int
) -> None:
    head = _head(store.runtime)
    [whole] = _replayed(store.runtime, store.big.id, [None], head)
    parts = _replayed(
        store.runtime, store.big.id, [TenantPart(i, count) for i in range(count)], head
    )
    for spec in TABLES:
        expected = dict(whole.table_rows(spec.name))
        held = [dict(p.table_rows(spec.name)) for p in parts]
        union = {key: row for rows in held for key, row in rows.items()}
        assert union == expected, spec.name
        assert sum(map(len, held)) == len(expected), spec.name  # each row in one part
        if spec.owner is None:
            assert not any(held[1:]), spec.name  # the tenant's own rows are part 0's
        else:
            column = spec.key.index(spec.owner)
            for part, rows in zip(parts, held, strict=True):
                assert part.part is not None
                assert all(part.part.owns(key[column]) for key in rows), spec.name
    assert {k: v for p in parts for k, v in p.snapshots.items()} == whole.snapshots
    assert whole.marked > 0 and all(p.marked == whole.marked for p in parts)
    assert all(p.memories for p in parts)  # every part held memories of its own
    # An edge between two parts: each side's part holds its direction of it.
    links = dict(whole.table_rows("memory_links"))
    assert any((key[0].bytes[15] - values[0].bytes[15]) % count for key, values in links.items())


def test_verify_in_parts_finds_nothing_and_counts_as_one_replay(store: Store) -> None:
    drain_until_caught_up(store.runtime)
    database = store.runtime.database
    whole = verify(database, split_from=WHOLE)
    parts = verify(database, workers=2, split_from=0)
    assert whole.divergences == [] and parts.divergences == []
    assert (parts.rows, parts.events, parts.tenants) == (whole.rows, whole.events, whole.tenants)
    assert parts.events == _head(store.runtime)


def test_a_rebuild_in_parts_catches_up_with_writes_made_meanwhile(store: Store) -> None:
    client, headers = store.client, store.big.headers()
    memory_ids = [remember(client, headers, content="v0")["id"] for _ in range(4)]
    stop = threading.Event()
    written: list[int] = [0]
    failures: list[str] = []

    def writer() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            memory_id = rng.choice(memory_ids)
            body = {"content": f"next {uuid4().hex}"}
            # A new memory, and an edge to one the rebuild replayed: catch-up in parts.
            created = remember(client, headers, content="written during the rebuild")
            for response in (
                post(client, f"/v1/memories/{memory_id}/versions", body, headers),
                post(
                    client,
                    f"/v1/memories/{created['id']}/edges",
                    {"kind": "extends", "target_id": memory_id},
                    headers,
                ),
            ):
                if response.status_code != 201:
                    failures.append(f"{response.status_code}: {response.text}")
            written[0] += 1

    def hold_the_snapshot(_: str) -> None:
        target = written[0] + 3
        while written[0] < target and not failures:
            threading.Event().wait(0.01)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        done = rebuild(store.runtime.database, workers=2, split_from=0, report=hold_the_snapshot)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert failures == []
    assert done.split == 1 and done.workers == 2  # the big tenant, in parts
    assert done.caught_up >= 1  # writes landed between the snapshot and the swap
    drain_until_caught_up(store.runtime)
    assert verify(store.runtime.database, split_from=WHOLE).divergences == []


def test_a_part_that_meets_a_poison_event_has_its_tenant_replayed_whole(
    store: Store,
) -> None:
    """Memory A's poison stops its later events, an edge to B among them; B's part
    cannot know, so the tenant is replayed whole, or B would gain a link the log
    never gave it."""
    runtime, client = store.runtime, store.client
    tenant = Tenant(runtime, create_tenant(runtime.log, f"poisoned-{uuid4().hex[:6]}"))
    h = tenant.headers()
    a = UUID(remember(client, h, content="to be poisoned")["id"])
    while True:
        b = UUID(remember(client, h, content="the target")["id"])
        if b.bytes[15] % 2 != a.bytes[15] % 2:
            break
    c = remember(client, h, content="an edge to copy")["id"]
    added = post(client, f"/v1/memories/{c}/edges", {"kind": "extends", "target_id": str(b)}, h)
    assert added.status_code == 201, added.text
    drain_until_caught_up(runtime)
    insert_poison(runtime, tenant.id, a, "undecodable")
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT state FROM "{schema}"."{EVENTS_TABLE}"'
            " WHERE originator_id = %s AND topic = 'palimpsest:EdgeAdded'",
            (UUID(c),),
        ).fetchone()
    assert row is not None
    edge = json.loads(bytes(row[0]))
    edge["edge_id"] = {"_type_": "uuid_hex", "_data_": uuid4().hex}
    insert_event(runtime, tenant.id, a, "palimpsest:EdgeAdded", json.dumps(edge).encode())
    drain_until_caught_up(runtime)
    database = runtime.database
    whole = verify(database, tenant=tenant.id, split_from=WHOLE)
    parts = verify(database, tenant=tenant.id, workers=2, split_from=0)
    assert whole.divergences == [] and parts.divergences == []
    assert [u["memory_id"] for u in parts.unprojectable] == [str(a)]
    assert parts.unprojectable == whole.unprojectable
    assert parts.rows == whole.rows
