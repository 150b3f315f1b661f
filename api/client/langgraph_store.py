"""A LangGraph ``BaseStore`` kept in palimpsest, over the Python client.

Install with ``pip install 'palimpsest-memory[langgraph]'``. An item
``(namespace, key) -> value`` is one memory: its scope is the namespace's first
label, its project the rest joined with ``/`` (none for a one-label
namespace), its topic the key, and its content the value as JSON. ``put`` of a
new key creates the memory; of an existing key it records a new version (the
old value stays in the memory's history); ``delete`` forgets the memory
(reversibly: ``restore`` brings it back). ``search`` with a query is recall
(``mode``: by meaning and words, or by meaning alone; ``score`` is the similarity);
without one it lists. Reads wait up to ``wait`` seconds for revision, so a ``get``
right after a ``put`` sees it, and recall waits for the client's writes, so a
``search`` right after a ``put`` finds it.
The namespace filters of ``search`` and ``list_namespaces`` and the value
``filter`` are applied by the adapter to what the service returns. See
docs/client.md for the mapping's limits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from palimpsest.api.client.beliefs import (
    CurrentBelief,
    ListedCurrentBelief,
    ListedPendingBelief,
    RecallMode,
)
from palimpsest.api.client.models import MemoryType
from palimpsest.api.client.sync import Client

__all__ = ["PalimpsestStore"]

_FORGET_REASON = "deleted through the LangGraph store"


def _place(namespace: tuple[str, ...]) -> tuple[str, str | None]:
    """The scope and project a namespace maps to."""
    return namespace[0], "/".join(namespace[1:]) or None


def _namespace(scope: str, project: str | None) -> tuple[str, ...]:
    return (scope, *project.split("/")) if project else (scope,)


def _value(content: str | None) -> dict[str, Any]:
    """An item's value: the content as JSON, or ``{"content": text}`` for a memory
    written otherwise."""
    if content is None:
        return {}
    try:
        value = json.loads(content)
    except json.JSONDecodeError:
        return {"content": content}
    return value if isinstance(value, dict) else {"content": value}


def _compare(actual: Any, condition: Any) -> bool:
    """Whether ``actual`` meets a filter value (equality, or ``{"$op": operand}``)."""
    if not isinstance(condition, dict) or not all(k.startswith("$") for k in condition):
        return bool(actual == condition)
    checks: dict[str, Callable[[Any, Any], Any]] = {
        "$eq": lambda a, b: a == b,
        "$ne": lambda a, b: a != b,
        "$gt": lambda a, b: a is not None and a > b,
        "$gte": lambda a, b: a is not None and a >= b,
        "$lt": lambda a, b: a is not None and a < b,
        "$lte": lambda a, b: a is not None and a <= b,
    }
    return all(bool(checks[op](actual, operand)) for op, operand in condition.items())


def _matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    return all(_compare(value.get(k), c) for k, c in (filter or {}).items())


def _fits(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


class PalimpsestStore(BaseStore):
    """LangGraph's store interface over a palimpsest tenant (the client's token)."""

    def __init__(
        self,
        client: Client,
        *,
        memory_type: MemoryType = "note",
        wait: float = 5.0,
        mode: RecallMode = "hybrid",
    ) -> None:
        self.client = client
        self.memory_type = memory_type
        self.wait = wait
        self.mode = mode

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run each operation in order; a result per operation (None for a put)."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on a worker thread (the client is synchronous)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        msg = f"unknown store operation: {type(op).__name__}"
        raise TypeError(msg)

    def _memories(self, namespace_prefix: tuple[str, ...]) -> Iterator[Any]:
        """Every memory of the tenant under a namespace prefix (current and pending)."""
        scope = namespace_prefix[0] if namespace_prefix else None
        for memory in self.client.iter_memories(scope=scope, limit=200):
            if isinstance(memory, ListedCurrentBelief | ListedPendingBelief):
                namespace = _namespace(memory.scope, memory.project)
                if namespace[: len(namespace_prefix)] == namespace_prefix:
                    yield memory

    def _find(self, namespace: tuple[str, ...], key: str) -> tuple[UUID, CurrentBelief] | None:
        """The memory an item is, and its belief (waiting for revision): the newest
        of its scope, project and topic that is current and not forgotten."""
        scope, project = _place(namespace)
        for memory in self.client.iter_memories(scope=scope, topic=key, limit=200):
            if memory.project != project or not isinstance(
                memory, ListedCurrentBelief | ListedPendingBelief
            ):
                continue
            belief = self._current(memory.id)
            if belief is not None:
                return memory.id, belief
        return None

    def _current(self, memory_id: UUID) -> CurrentBelief | None:
        """The memory's current belief, unless it is forgotten (or not current in time)."""
        belief = self.client.read_memory(memory_id, wait=self.wait)
        if not isinstance(belief, CurrentBelief) or belief.belief["labels"]["archived"]:
            return None
        return belief

    @staticmethod
    def _item(belief: CurrentBelief, namespace: tuple[str, ...], key: str) -> Item:
        now = datetime.now(UTC)
        return Item(
            value=_value(belief.content),
            key=key,
            namespace=namespace,
            created_at=now,
            updated_at=now,
        )

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = self._find(namespace, key)
        return None if found is None else self._item(found[1], namespace, key)

    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any] | None) -> None:
        found = self._find(namespace, key)
        if value is None:
            if found is not None:
                self.client.forget(found[0], reason=_FORGET_REASON)
            return
        content = json.dumps(value, ensure_ascii=False, sort_keys=True)
        if found is not None:
            self.client.create_version(found[0], content)
            return
        scope, project = _place(namespace)
        self.client.create_memory(
            content, type=self.memory_type, scope=scope, project=project, topic=key
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found: list[SearchItem] = []
        wanted = op.offset + op.limit
        if op.query:
            scope = op.namespace_prefix[0] if op.namespace_prefix else None
            k = min(100, max(wanted * 4, 10))
            recalled = self.client.recall(op.query, k=k, scope=scope, mode=self.mode)
            candidates = [
                (m, m.similarity)
                for m in recalled.items
                if _namespace(m.scope, m.project)[: len(op.namespace_prefix)] == op.namespace_prefix
            ]
        else:
            candidates = [(m, None) for m in self._memories(op.namespace_prefix)]
        for memory, score in candidates:
            if memory.topic is None or len(found) >= wanted:
                continue
            namespace = _namespace(memory.scope, memory.project)
            belief = self._current(memory.id)
            if belief is None:
                continue
            item = self._item(belief, namespace, memory.topic)
            if _matches(item.value, op.filter):
                found.append(
                    SearchItem(
                        namespace=namespace,
                        key=item.key,
                        value=item.value,
                        created_at=item.created_at,
                        updated_at=item.updated_at,
                        score=score,
                    )
                )
        return found[op.offset : wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces: set[tuple[str, ...]] = set()
        for memory in self._memories(()):
            namespace = _namespace(memory.scope, memory.project)
            if all(_fits(namespace, c) for c in op.match_conditions or ()):
                namespaces.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(namespaces)[op.offset : op.offset + op.limit]
