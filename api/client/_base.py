"""What the synchronous and asynchronous clients share: settings, requests, answers.

Both clients send a :class:`~palimpsest.api.client._calls.Call` the same way: bearer
token, one ``Idempotency-Key`` per call that is not a ``GET`` (kept for all
its attempts, so a retry after a lost answer replays the original instead of
writing twice), a timeout lengthened by what the server may hold the answer
back, and the answer read into the call's answer model or raised as its
problem's exception.

Both also read their own writes: each remembers the highest ``position`` its write
answers carried (:class:`WriteMark`) and sends it as ``after`` with every recall
that names none, so the service answers once those writes are indexed
(docs/client.md, "Recall sees your writes").
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pydantic import TypeAdapter

from palimpsest.api.client._beliefs import (
    MemoryListItem,
    MemoryPagePublic,
    RecalledMemory,
    RecallPublic,
)
from palimpsest.api.client._calls import Call
from palimpsest.api.client._records import (
    EventPagePublic,
    EventPublic,
    ObservationListItem,
    ObservationPagePublic,
)
from palimpsest.api.client._retries import RetryPolicy
from palimpsest.api.client._sse import ServerSentEvent
from palimpsest.api.client.errors import problem_error
from palimpsest.api.client.models import BatchPublic, ProposalPagePublic, ProposalPublic

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EVENT_PAGES",
    "MEMORY_PAGES",
    "OBSERVATION_PAGES",
    "ObservationContent",
    "PROPOSAL_PAGES",
    "Pages",
    "RECALL_PAGES",
    "Settings",
    "WriteMark",
    "answer",
    "feed_entry",
    "request_for",
]

T = TypeVar("T")
Page = TypeVar("Page")
Item = TypeVar("Item")

DEFAULT_TIMEOUT_S = 60.0
_CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ObservationContent:
    """An observation's bytes and the media type they were captured with."""

    content: bytes
    media_type: str

    @property
    def text(self) -> str:
        """The content as UTF-8 text."""
        return self.content.decode("utf-8", errors="surrogatepass")


@dataclass(frozen=True)
class Settings:
    """Where the service is, who calls it, and how patiently.

    ``base_url`` and ``token`` fall back to ``PALIMPSEST_URL`` and
    ``PALIMPSEST_TOKEN``; with an injected HTTP client, ``base_url`` may come from it."""

    base_url: str
    token: str | None
    timeout_s: float = DEFAULT_TIMEOUT_S
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        base_url: str | None,
        token: str | None,
        http_base_url: str,
        timeout_s: float,
        retry: RetryPolicy | None,
        headers: dict[str, str] | None,
    ) -> Settings:
        """Settings from a client's arguments, the environment and its HTTP client."""
        url = base_url or os.environ.get("PALIMPSEST_URL") or http_base_url
        if not url:
            msg = "no base_url: pass one, set PALIMPSEST_URL, or inject a client that has one"
            raise ValueError(msg)
        return cls(
            base_url=url.rstrip("/"),
            token=token if token is not None else os.environ.get("PALIMPSEST_TOKEN"),
            timeout_s=timeout_s,
            retry=retry or RetryPolicy(),
            headers=dict(headers or {}),
        )


def request_for(
    settings: Settings,
    http: httpx2.Client | httpx2.AsyncClient,
    call: Call[Any],
    idempotency_key: str | None,
) -> httpx2.Request:
    """Return the HTTP request of ``call`` (the same for each of its attempts)."""
    import httpx2  # on first use: importing the client stays light

    headers = {"Accept": call.accept, **settings.headers}
    if settings.token:
        headers["Authorization"] = f"Bearer {settings.token}"
    if call.method != "GET":
        headers["Idempotency-Key"] = idempotency_key or f"palimpsest-client-{uuid.uuid4()}"
    timeout = httpx2.Timeout(settings.timeout_s + call.holds_for, connect=_CONNECT_TIMEOUT_S)
    return http.build_request(
        call.method,
        settings.base_url + call.path,
        params=dict(call.params),
        json=call.json,
        headers=headers,
        timeout=timeout,
    )


@cache
def _adapter(tp: Hashable) -> TypeAdapter[Any]:
    # Building a validator costs milliseconds: once per answer type, on first use,
    # so that importing the client builds none.
    return TypeAdapter(cast(Any, tp))


def answer(call: Call[T], response: httpx2.Response) -> T:
    """Return the body of a read answer as the call's model, or raise its problem."""
    if response.status_code >= 400:
        raise problem_error(response)
    return cast(T, _adapter(cast(Hashable, call.returns)).validate_json(response.content))


def feed_entry(message: ServerSentEvent) -> EventPublic:
    """The feed entry an SSE message of ``/v1/events/stream`` carries (its ``data``)."""
    return EventPublic.model_validate_json(message.data)


class WriteMark:
    """The highest log position of the writes a client had answered, safe to share
    between threads (and tasks: nothing awaits while it is held).

    A write answer is the answer of any call but a ``GET`` that carries a
    ``position`` (memories, versions, edges, contributions, settlements, decisions,
    observations, retention) or whose batch results do; a replayed answer carries
    the original write's, which is already indexed or about to be."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._position: int | None = None

    @property
    def position(self) -> int | None:
        """The highest position noted (None before the first write)."""
        return self._position

    def note(self, call: Call[Any], answered: object) -> None:
        """Note the position of ``answered``, the answer of ``call``, if it is a write's."""
        if call.method == "GET":
            return
        positions = [getattr(answered, "position", None)]
        if isinstance(answered, BatchPublic):
            positions += [result.get("position") for result in answered.results]
        highest = max((p for p in positions if isinstance(p, int)), default=None)
        if highest is None:
            return
        with self._lock:  # two writes answered at once: the higher one stays
            if self._position is None or highest > self._position:
                self._position = highest

    def after(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Return a recall's keyword arguments with ``after`` set to the position noted,
        unless the caller gave one (or nothing was written yet)."""
        position = self._position
        if kwargs.get("after") is not None or position is None:
            return kwargs
        return {**kwargs, "after": position}


@dataclass(frozen=True)
class Pages(Generic[Page, Item]):
    """How to walk a listing: its items, and the cursor of the next page (None: last)."""

    items: Callable[[Page], Sequence[Item]]
    next_cursor: Callable[[Page], Any]
    cursor: str = "cursor"
    """The keyword argument of the listing's call that takes the cursor."""

    def next_call_kwargs(self, kwargs: dict[str, Any], page: Page) -> dict[str, Any] | None:
        """The keyword arguments of the next page's call (None after the last page)."""
        following = self.next_cursor(page)
        if following is None or not self.items(page):
            return None
        return {**kwargs, self.cursor: following}


MEMORY_PAGES: Pages[MemoryPagePublic, MemoryListItem] = Pages(
    lambda p: p.items, lambda p: p.next_cursor
)
OBSERVATION_PAGES: Pages[ObservationPagePublic, ObservationListItem] = Pages(
    lambda p: p.items, lambda p: p.next_cursor
)
PROPOSAL_PAGES: Pages[ProposalPagePublic, ProposalPublic] = Pages(
    lambda p: p.items, lambda p: p.next_cursor
)
RECALL_PAGES: Pages[RecallPublic, RecalledMemory] = Pages(
    lambda p: p.items, lambda p: p.next_cursor
)
EVENT_PAGES: Pages[EventPagePublic, EventPublic] = Pages(
    lambda p: p.events, lambda p: p.next_after, cursor="after"
)
