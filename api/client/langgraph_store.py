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

A label holding ``/`` is refused (:class:`InvalidNamespaceError`): ``("a", "b/c")``
and ``("a", "b", "c")`` would be the same project. So the join is one to one, and the
service applies a ``search``'s namespace prefix inside its search (scope, and
``project_under``: the project and those below it), before it keeps the best: a
user's memories are found among any number of other users'. The value ``filter``
is applied by the adapter to what the service returns (recall asks for more then).
``list_namespaces`` lists the namespaces the store wrote: those holding an item
(a memory with a topic whose content is a JSON object, what ``put`` writes). See
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
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from palimpsest.api.client._beliefs import (
    CurrentBelief,
    ListedCurrentBelief,
    ListedPendingBelief,
    RecalledCurrent,
    RecallMode,
)
from palimpsest.api.client._sync import Client
from palimpsest.api.client.models import MemoryType

__all__ = ["PalimpsestStore"]

_FORGET_REASON = "deleted through the LangGraph store"

_LEVELS = "/"
"""What joins a namespace's labels after the first into a project."""

_FILTERED_PAGE = 100
"""Recall's page when a value ``filter`` may drop what it returns (its largest ``k``)."""


def _checked(namespace: tuple[str, ...]) -> tuple[str, ...]:
    """The namespace, when no label holds ``/``.

    Raises:
        InvalidNamespaceError: a label holds ``/``, which joins labels into a project:
            ``("a", "b/c")`` and ``("a", "b", "c")`` would be one namespace.
    """
    for label in namespace:
        if _LEVELS in label:
            msg = (
                f"Invalid namespace label {label!r} in {namespace}: palimpsest's LangGraph "
                f"store joins labels with {_LEVELS!r}, so a label cannot contain it."
            )
            raise InvalidNamespaceError(msg)
    return namespace


def _place(namespace: tuple[str, ...]) -> tuple[str, str | None]:
    """The scope and project a namespace maps to."""
    return namespace[0], _LEVELS.join(namespace[1:]) or None


def _namespace(scope: str, project: str | None) -> tuple[str, ...]:
    return (scope, *project.split(_LEVELS)) if project else (scope,)


def _is_item(content: str | None) -> bool:
    """Whether a memory's content is what ``put`` writes: a JSON object."""
    try:
        return content is not None and isinstance(json.loads(content), dict)
    except json.JSONDecodeError:
        return False


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
            return self._get(_checked(op.namespace), op.key)
        if isinstance(op, PutOp):
            self._put(_checked(op.namespace), op.key, op.value)
            return None
        if isinstance(op, SearchOp):
            _checked(op.namespace_prefix)
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
        listed = self.client.iter_memories(scope=scope, project=project, topic=key, limit=200)
        for memory in listed:
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
    def _item(content: str | None, namespace: tuple[str, ...], key: str) -> Item:
        now = datetime.now(UTC)
        return Item(
            value=_value(content),
            key=key,
            namespace=namespace,
            created_at=now,
            updated_at=now,
        )

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = self._find(namespace, key)
        return None if found is None else self._item(found[1].content, namespace, key)

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
        candidates: Iterable[tuple[Any, float | None]]
        if op.query:
            candidates = self._recalled(op.query, op.namespace_prefix, op.filter, wanted)
        else:
            candidates = ((m, None) for m in self._memories(op.namespace_prefix))
        for memory, score in candidates:
            if len(found) >= wanted:
                break
            if memory.topic is None:
                continue
            namespace = _namespace(memory.scope, memory.project)
            current, content = self._content(memory)
            if not current:
                continue
            item = self._item(content, namespace, memory.topic)
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

    def _recalled(
        self,
        query: str,
        prefix: tuple[str, ...],
        filter: dict[str, Any] | None,
        wanted: int,
    ) -> Iterator[tuple[Any, float | None]]:
        """Recall's memories under a namespace prefix, best first, page after page as
        they are consumed: the prefix is a filter of the search itself (the scope, and
        the project with those below it), so every page is of the prefix."""
        scope = prefix[0] if prefix else None
        under = _LEVELS.join(prefix[1:]) or None
        # Without a value filter the first page is all a search needs, unless some of it
        # is not an item (no topic) or not current: then the next page is asked.
        k = _FILTERED_PAGE if filter else min(_FILTERED_PAGE, max(wanted, 1))
        for memory in self.client.iter_recall(
            query, k=k, scope=scope, project_under=under, mode=self.mode
        ):
            yield memory, memory.similarity

    def _content(self, memory: Any) -> tuple[bool, str | None]:
        """Whether a memory found is an item now, and its content: as recall answered
        it when current (sparing a read), else read (waiting for revision)."""
        if isinstance(memory, RecalledCurrent) and memory.content is not None:
            return not memory.belief["labels"]["archived"], memory.content
        belief = self._current(memory.id)
        return belief is not None, None if belief is None else belief.content

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces: set[tuple[str, ...]] = set()
        for memory in self._memories(()):
            namespace = _namespace(memory.scope, memory.project)
            if memory.topic is None or not all(
                _fits(namespace, c) for c in op.match_conditions or ()
            ):
                continue
            if namespace in namespaces or not self._written_by_a_put(memory):
                continue
            namespaces.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def _written_by_a_put(self, memory: Any) -> bool:
        """Whether a listed memory is an item the store wrote (its content a JSON
        object); a pending one is read once revised."""
        if isinstance(memory, ListedCurrentBelief):
            return _is_item(memory.content)
        belief = self._current(memory.id)
        return belief is not None and _is_item(belief.content)
