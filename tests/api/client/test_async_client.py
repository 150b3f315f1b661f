"""``AsyncClient`` does what ``Client`` does: the same methods with the same
arguments, typed answers, errors, pages and the stream, against the real server."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from palimpsest.api.client import AsyncClient, Client, NotFoundError, PermissionDeniedError
from palimpsest.api.client import _calls as calls
from palimpsest.api.client._beliefs import CurrentBelief
from palimpsest.api.client._records import EventPublic
from palimpsest.api.client.models import MemoryCreated
from palimpsest.projections.runtime import Runtime
from tests.api.client.conftest import drain_soon
from tests.conftest import Tenant


def _public_methods(client: object) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(client, name))
        for name in dir(client)
        if not name.startswith("_") and callable(getattr(client, name))
    }


def test_both_clients_offer_the_same_methods_with_the_same_arguments() -> None:
    with Client("http://x") as client:
        sync = _public_methods(client)
    aio = _public_methods(AsyncClient("http://x"))
    sync.pop("close")
    aio.pop("aclose")
    assert sync.keys() == aio.keys()
    for name, signature in sync.items():
        assert list(signature.parameters) == list(aio[name].parameters), name


def test_the_async_client_writes_reads_iterates_and_streams(
    base_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    async def scenario() -> tuple[MemoryCreated, Any, list[Any], list[EventPublic]]:
        async with AsyncClient(base_url, token=tenant.token("writer")) as client:
            created = await client.create_memory("async fact", type="fact", scope="a")
            for n in range(3):
                await client.create_memory(f"note {n}", type="note", scope="a")
            drain_soon(runtime)
            belief = await client.read_memory(created.id, wait=10)
            walked = [m async for m in client.iter_memories(scope="a", limit=2)]
            streamed = [e async for e in client.stream_events(limit=4)]
            listed = (await client.list_events(limit=4)).events
            assert streamed == listed
            with pytest.raises(NotFoundError):
                await client.read_versions(tenant.id)
        async with AsyncClient(base_url, token=tenant.token("reader")) as reader:
            with pytest.raises(PermissionDeniedError):
                await reader.forget(created.id, reason="no")
        return created, belief, walked, streamed

    created, belief, walked, streamed = asyncio.run(scenario())
    assert isinstance(created, MemoryCreated)
    assert isinstance(belief, CurrentBelief) and belief.content == "async fact"
    assert len(walked) == 4 and walked[-1].id == created.id
    assert all(isinstance(e, EventPublic) for e in streamed) and len(streamed) == 4


def test_every_endpoint_is_a_method_of_both_clients() -> None:
    endpoints = {
        name
        for name, value in vars(calls).items()
        if inspect.isfunction(value) and not name.startswith("_") and name in calls.__all__
    }
    assert len(endpoints) >= 45
    with Client("http://x") as client:
        assert endpoints <= set(_public_methods(client))
    assert endpoints <= set(_public_methods(AsyncClient("http://x")))
