"""Rebuild writes back the snapshots the write path took, each as it was taken.

Replay keeps a snapshot's state while it goes on applying the memory's later
events, which append to the memory's lists and set keys of its dict in place;
the state kept shares only records that cannot change.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import datetime
from typing import Any
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.history.rebuild import rebuild
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.eventlog import SNAPSHOT_INTERVAL
from palimpsest.projections.views.read_models import _UNCHANGING
from tests.api.helpers import observe, post, remember
from tests.conftest import Tenant, drain_until_caught_up

_SCALARS = (type(None), bool, int, float, str, UUID, datetime)


def _cannot_change(hint: Any) -> bool:
    """Whether every value of the type ``hint`` is immutable, all the way down."""
    if hint in _SCALARS:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return all(map(_cannot_change, args))
    if origin is tuple:
        return all(_cannot_change(a) for a in args if a is not Ellipsis)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        frozen = hint.__dataclass_params__.frozen  # type: ignore[attr-defined]
        fields = typing.get_type_hints(hint)
        return bool(frozen) and all(
            _cannot_change(fields[f.name]) for f in dataclasses.fields(hint)
        )
    return False


def test_a_snapshot_shares_only_records_that_cannot_change() -> None:
    # Replay copies a snapshot's lists and dicts and shares their items when every
    # item is of one of these types: a list field, or a mutable record, added to
    # one of them would let a later event change a snapshot already taken.
    assert [kind for kind in _UNCHANGING if not _cannot_change(kind)] == []


def _snapshots(runtime: Runtime, tenant_id: UUID) -> dict[tuple[UUID, int], bytes]:
    """Every snapshot of the tenant as stored, without the time it was taken at (the
    state's first field, which a rebuild sets anew)."""
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f'SELECT originator_id, originator_version, state FROM "{schema}".palimpsest_snapshots'
            " WHERE tenant_id = %s",
            (tenant_id,),
        ).fetchall()
    found = {}
    for memory_id, version, state in rows:
        stored = bytes(state)
        assert stored.startswith(b'{"timestamp":{'), stored[:40]
        found[(memory_id, version)] = stored[stored.index(b"}") + 1 :]
    return found


@pytest.mark.slow
def test_rebuild_writes_each_snapshot_as_the_write_path_took_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    observation = observe(client, headers, "an observation cited again and again")
    evidence = [{"observation_id": observation, "start": 0, "end": 11}]
    memory = remember(client, headers, type="fact", content="v0", evidence=evidence)["id"]
    others = [remember(client, headers, type="fact", content=f"o{i}")["id"] for i in range(3)]
    # Each revision with evidence is two events of the memory (its lists grow); an
    # edge sets a key of its dict, a forget and a restore rebind an attribute. Past
    # two snapshot intervals the log holds two snapshots, each followed by changes.
    revisions = SNAPSHOT_INTERVAL + 10
    edges_at = {10: others[0], SNAPSHOT_INTERVAL // 2 + 10: others[1], revisions - 1: others[2]}
    for i in range(revisions):
        version = {"content": f"v{i + 1}", "evidence": evidence}
        revised = post(client, f"/v1/memories/{memory}/versions", version, headers)
        assert revised.status_code == 201, revised.text
        if i in edges_at:
            edge = {"kind": "extends", "target_id": edges_at[i]}
            added = post(client, f"/v1/memories/{memory}/edges", edge, headers)
            assert added.status_code == 201, added.text
        if i == SNAPSHOT_INTERVAL // 2 + 5:
            steps: list[tuple[str, dict[str, str]]] = [
                ("forget", {"reason": "tidy"}),
                ("restore", {}),
            ]
            for step, body in steps:
                done = post(client, f"/v1/memories/{memory}/{step}", body, headers)
                assert done.status_code == 201, done.text
    assert post(client, f"/v1/memories/{memory}/pin", {}, headers).status_code == 201
    taken = _snapshots(runtime, tenant.id)
    assert len([v for m, v in taken if str(m) == memory]) == 2, taken.keys()
    drain_until_caught_up(runtime)
    assert verify(runtime.database, tenant=tenant.id).divergences == []

    rebuild(runtime.database)

    assert _snapshots(runtime, tenant.id) == taken
    assert verify(runtime.database, tenant=tenant.id).divergences == []
