"""LangGraph namespaces are filters the server applies (issue 44, item 5): a user's
memory is found among many users' at a small ``limit``, a label with ``/`` is
refused rather than aliased to another namespace, and ``list_namespaces`` lists what
the store wrote. Through the real LangGraph store, against the real server with its
drains running as ``palimpsest serve`` runs them, and the real embedding model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langgraph.store.base import InvalidNamespaceError

from palimpsest.api.client import Client
from palimpsest.api.client._beliefs import RecallMode
from palimpsest.api.client.langgraph_store import PalimpsestStore
from palimpsest.projections.runtime import Runtime
from tests.api.client.conftest import served_with_drains
from tests.conftest import Tenant, index_until_caught_up

_OTHER_USERS = 120


@pytest.fixture(scope="module")
def served(runtime: Runtime) -> Iterator[str]:
    with served_with_drains(runtime) as url:
        yield url


@pytest.fixture
def store(served: str, tenant: Tenant) -> Iterator[PalimpsestStore]:
    with Client(served, token=tenant.token("writer")) as client:
        yield PalimpsestStore(client)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_a_users_memory_is_found_among_121_users_at_limit_5(
    store: PalimpsestStore, runtime: Runtime, tenant: Tenant, mode: RecallMode
) -> None:
    # Every other user's memory is nearer the query than the target's: a search cut
    # to the best few of all users, then filtered by user, leaves the target nothing.
    for i in range(_OTHER_USERS):
        store.put(
            ("memories", f"user-{i}"),
            "theme",
            {"text": f"User {i}: which colour theme does the user prefer? The dark theme."},
        )
    store.put(("memories", "target"), "theme", {"text": "The user prefers a light colour theme"})
    store.put(
        ("memories", "target", "work"), "laptop", {"text": "A light theme on the work laptop too"}
    )
    index_until_caught_up(runtime, tenant.id)
    store.mode = mode

    found = store.search(("memories", "target"), query="Which colour theme does the user prefer?")
    assert {(i.namespace, i.key) for i in found} == {
        (("memories", "target"), "theme"),
        (("memories", "target", "work"), "laptop"),
    }
    top = store.search(("memories", "target"), query="which editor theme?", limit=1)
    assert [(i.namespace, i.value) for i in top] == [
        (("memories", "target"), {"text": "The user prefers a light colour theme"})
    ]
    # A namespace that only begins like another is not under it.
    assert store.search(("memories", "targ"), query="theme") == []
    assert store.search(("memories", "user-1"), query="theme", limit=5)[0].key == "theme"


def test_a_label_with_a_slash_is_refused_not_aliased(store: PalimpsestStore) -> None:
    store.put(("users", "a", "b"), "k", {"n": 1})
    for namespace in (("users", "a/b"), ("users/a", "b")):
        with pytest.raises(InvalidNamespaceError, match="cannot contain it"):
            store.put(namespace, "k", {"n": 2})
        with pytest.raises(InvalidNamespaceError):
            store.get(namespace, "k")
        with pytest.raises(InvalidNamespaceError):
            store.search(namespace, query="n")
    # The refused puts wrote nothing: the one item is the one put.
    item = store.get(("users", "a", "b"), "k")
    assert item is not None and item.value == {"n": 1}
    assert [m.project for m in store.client.iter_memories(scope="users")] == ["a/b"]


def test_list_namespaces_lists_only_what_the_store_wrote(store: PalimpsestStore) -> None:
    client = store.client
    # Memories written otherwise: by an agent over HTTP or MCP, with or without a topic.
    client.create_memory("Standup is at ten", type="fact", scope="default")
    client.create_memory("The user likes tea", type="preference", scope="user", topic="drinks")
    client.create_memory("Deploys on Friday", type="fact", scope="team", project="ops")
    store.put(("team", "x"), "k", {"n": 1})
    store.put(("agent",), "k", {"n": 2})

    assert store.list_namespaces() == [("agent",), ("team", "x")]
    assert store.list_namespaces(prefix=("team",)) == [("team", "x")]
    assert store.list_namespaces(max_depth=1) == [("agent",), ("team",)]
