"""The LangGraph store over a real server: the four operations ``batch`` and
``abatch`` handle (get, put, search, list namespaces), through LangGraph's own
``BaseStore`` methods, which call them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import Item

from palimpsest.api.client import Client
from palimpsest.api.client.langgraph_store import PalimpsestStore
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant, index_until_caught_up


@pytest.fixture
def store(base_url: str, runtime: Runtime, tenant: Tenant) -> Iterator[PalimpsestStore]:
    # A drain running beside the server, as a deployment has one: reads wait for it.
    stop = threading.Event()

    def drain() -> None:
        while not stop.wait(0.05):
            drain_revisions(runtime.log)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    with Client(base_url, token=tenant.token("writer")) as client:
        yield PalimpsestStore(client)
    stop.set()
    thread.join(5)


def test_put_get_versions_and_delete(store: PalimpsestStore) -> None:
    namespace = ("users", "alice", "prefs")
    assert store.get(namespace, "food") is None
    store.put(namespace, "food", {"likes": "pizza", "level": 3})
    item = store.get(namespace, "food")
    assert isinstance(item, Item)
    assert item.value == {"likes": "pizza", "level": 3} and item.namespace == namespace

    # Putting the key again records a new version of the same memory
    store.put(namespace, "food", {"likes": "sushi", "level": 4})
    assert store.get(namespace, "food").value["likes"] == "sushi"  # type: ignore[union-attr]
    [memory] = list(store.client.iter_memories(scope="users", topic="food"))
    assert len(store.client.read_versions(memory.id).versions) == 2

    # Deleting forgets it (reversibly): gone from the store, archived in palimpsest
    store.delete(namespace, "food")
    assert store.get(namespace, "food") is None
    archived = list(store.client.iter_memories(scope="users", include_archived=True))
    assert [m.id for m in archived] == [memory.id]


def test_search_lists_filters_and_recalls(
    store: PalimpsestStore, runtime: Runtime, tenant: Tenant
) -> None:
    store.put(("docs", "a"), "one", {"text": "The deploy runs at nine", "kind": "ops"})
    store.put(("docs", "a"), "two", {"text": "Lunch is at noon", "kind": "life"})
    store.put(("docs", "b"), "three", {"text": "Backups run nightly", "kind": "ops"})

    listed = store.search(("docs",), limit=10)
    assert {(i.namespace, i.key) for i in listed} == {
        (("docs", "a"), "one"),
        (("docs", "a"), "two"),
        (("docs", "b"), "three"),
    }
    ops = store.search(("docs",), filter={"kind": "ops"})
    assert {i.key for i in ops} == {"one", "three"}
    assert [i.key for i in store.search(("docs", "b"))] == ["three"]
    assert len(store.search(("docs",), limit=1, offset=1)) == 1

    index_until_caught_up(runtime, tenant.id)
    [best, *_] = store.search(("docs",), query="when does the deployment happen?", limit=2)
    assert best.key == "one" and best.score is not None


def test_list_namespaces_and_the_async_methods(store: PalimpsestStore) -> None:
    async def scenario() -> list[tuple[str, ...]]:
        await store.aput(("team", "x", "notes"), "k", {"n": 1})
        await store.aput(("team", "y"), "k", {"n": 2})
        await store.aput(("other",), "k", {"n": 3})
        got = await store.aget(("team", "y"), "k")
        assert got is not None and got.value == {"n": 2}
        assert [i.key for i in await store.asearch(("team", "x"))] == ["k"]
        return await store.alist_namespaces(prefix=("team",))

    assert asyncio.run(scenario()) == [("team", "x", "notes"), ("team", "y")]
    assert store.list_namespaces(max_depth=1) == [("other",), ("team",)]
    assert store.list_namespaces(suffix=("notes",)) == [("team", "x", "notes")]


class _State(TypedDict):
    text: str
    seen: str


def _remember(state: _State) -> dict[str, str]:
    get_store().put(("agent", "notes"), "last", {"text": state["text"]})
    return {}


def _read_back(state: _State) -> dict[str, str]:
    item = get_store().get(("agent", "notes"), "last")
    return {"seen": item.value["text"] if item else ""}


def test_a_compiled_graph_keeps_its_memory_in_palimpsest(store: PalimpsestStore) -> None:
    builder = StateGraph(_State)
    builder.add_node("remember", _remember)
    builder.add_node("read_back", _read_back)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "read_back")
    builder.add_edge("read_back", END)
    graph = builder.compile(store=store)
    assert graph.invoke({"text": "the build is green", "seen": ""})["seen"] == "the build is green"
    [memory] = store.client.iter_memories(scope="agent")
    assert memory.topic == "last" and memory.project == "notes"
