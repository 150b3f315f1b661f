"""``AsyncClient``: the HTTP API from asyncio, method for method as ``Client``.

Each endpoint of :mod:`palimpsest.api.client._calls` is a coroutine method with the same
arguments, returning its typed answer; listings also have an ``iter_`` method
that walks every page (``async for``), and the event feed streams as an async
iterator.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from palimpsest.api.client import _calls as calls
from palimpsest.api.client._base import (
    DEFAULT_TIMEOUT_S,
    EVENT_PAGES,
    MEMORY_PAGES,
    OBSERVATION_PAGES,
    PROPOSAL_PAGES,
    RECALL_PAGES,
    ObservationContent,
    Pages,
    Settings,
    WriteMark,
    answer,
    feed_entry,
    request_for,
)
from palimpsest.api.client._calls import Call
from palimpsest.api.client._records import EventPublic
from palimpsest.api.client._retries import RetryPolicy
from palimpsest.api.client._sse import SseParser
from palimpsest.api.client.errors import APIConnectionError, problem_error

if TYPE_CHECKING:
    import httpx2

__all__ = ["AsyncClient"]

P = ParamSpec("P")
T = TypeVar("T")
Page = TypeVar("Page")
Item = TypeVar("Item")


async def _sleep(seconds: float) -> None:
    # asyncio is imported on first use, not with the module: ``from palimpsest import
    # Client`` imports this module too, and asyncio would be a fifth of its import
    # time (a program that awaits this client has asyncio loaded already).
    import asyncio

    await asyncio.sleep(seconds)


class _Endpoint(Generic[P, T]):
    """A method that sends the call its builder makes, and returns the answer;
    ``sees_writes``: a recall, sent ``after`` the client's writes unless told otherwise."""

    def __init__(self, build: Callable[P, Call[T]], *, sees_writes: bool = False) -> None:
        self._build = build
        self._sees_writes = sees_writes

    def __get__(
        self, client: AsyncClient, owner: type[AsyncClient] | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]:
        build, sees_writes = self._build, self._sees_writes

        @functools.wraps(build)
        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            if sees_writes:
                # The mark adds ``after`` only, a keyword of the recall it builds
                # (mypy cannot type a ParamSpec's keywords rebuilt as a dict).
                kwargs = client._write_mark.after(kwargs)  # type: ignore[assignment]
            return await client.send(build(*args, **kwargs))

        return method


class _Walk(Generic[P, Page, Item]):
    """A method that iterates every item of a listing, page after page (``sees_writes``:
    as :class:`_Endpoint`, every page after the same writes)."""

    def __init__(
        self,
        build: Callable[P, Call[Page]],
        pages: Pages[Page, Item],
        *,
        sees_writes: bool = False,
    ) -> None:
        self._build = build
        self._pages = pages
        self._sees_writes = sees_writes

    def __get__(
        self, client: AsyncClient, owner: type[AsyncClient] | None = None
    ) -> Callable[P, AsyncIterator[Item]]:
        build, pages, sees_writes = self._build, self._pages, self._sees_writes

        @functools.wraps(build)
        async def method(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Item]:
            following: dict[str, Any] | None = dict(kwargs)
            if sees_writes:
                following = client._write_mark.after(dict(kwargs))
            while following is not None:
                page = await client.send(build(*args, **following))
                for item in pages.items(page):
                    yield item
                following = pages.next_call_kwargs(following, page)

        return method


class AsyncClient:
    """The palimpsest HTTP API, over an ``httpx2.AsyncClient`` (yours, if you pass one).

    ``base_url`` and ``token`` fall back to ``PALIMPSEST_URL`` and ``PALIMPSEST_TOKEN``.
    Failed attempts are retried as ``retry`` says (:mod:`palimpsest.api.client._retries`); errors
    raise :mod:`palimpsest.api.client.errors`. Use it as a context manager, or ``close()`` it.

    Recall sees the client's own writes: ``recall`` and ``iter_recall`` send
    :attr:`written_position` as ``after`` unless given one, so the service waits
    (at most 5 s) until those writes are indexed. Safe to share between tasks."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        import httpx2  # on first use: importing the client stays light

        self._owns_http = http_client is None
        self._http = http_client or httpx2.AsyncClient()
        self.settings = Settings.of(
            base_url, token, str(self._http.base_url), timeout, retry, headers
        )
        self._write_mark = WriteMark()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client, unless it was injected (then its owner closes it)."""
        if self._owns_http:
            await self._http.aclose()

    async def send(self, call: Call[T], *, idempotency_key: str | None = None) -> T:
        """Send ``call`` (retrying as the policy says) and return its typed answer.
        ``idempotency_key`` replaces the generated one (reuse it to retry a write
        yourself, later, without writing twice). A write's answer moves
        :attr:`written_position` up; a call sent here is sent as built (a recall
        built without ``after`` does not wait for anything)."""
        response = await self._respond(call, idempotency_key, stream=False)
        answered = answer(call, response)
        self._write_mark.note(call, answered)
        return answered

    async def _respond(
        self,
        call: Call[Any],
        idempotency_key: str | None,
        *,
        stream: bool,
    ) -> httpx2.Response:
        """Return the first answer that is not worth retrying (an error one raised)."""
        import httpx2  # on first use: importing the client stays light

        policy = self.settings.retry
        request = request_for(self.settings, self._http, call, idempotency_key)
        retry = 0
        while True:
            try:
                response = await self._http.send(request, stream=stream)
            except httpx2.TransportError as error:
                if retry >= policy.max_retries:
                    raise APIConnectionError(f"{call.method} {call.path}: {error}") from error
                await _sleep(policy.delay(retry))
                retry += 1
                continue
            if response.status_code < 400:
                return response
            if stream:
                await response.aread()
                await response.aclose()
            if policy.retries_status(response.status_code) and retry < policy.max_retries:
                await _sleep(policy.delay(retry, response.headers.get("retry-after")))
                retry += 1
                continue
            raise problem_error(response)

    @property
    def written_position(self) -> int | None:
        """The highest log position of the writes this client had answered (None before
        its first): what its recalls are sent ``after``."""
        return self._write_mark.position

    # Observations
    create_observation = _Endpoint(calls.create_observation)
    list_observations = _Endpoint(calls.list_observations)
    iter_observations = _Walk(calls.list_observations, OBSERVATION_PAGES)
    read_observation = _Endpoint(calls.read_observation)
    retract_observation = _Endpoint(calls.retract_observation)

    async def read_observation_content(self, observation_id: calls.Id, /) -> ObservationContent:
        """An observation's bytes, with their media type (410 once expired or erased)."""
        call = calls.read_observation_content(observation_id)
        response = await self._respond(call, None, stream=False)
        media_type = response.headers.get("content-type", "application/octet-stream")
        return ObservationContent(response.content, media_type.split(";")[0])

    # Memories
    create_memory = _Endpoint(calls.create_memory)
    create_version = _Endpoint(calls.create_version)
    settle = _Endpoint(calls.settle)
    create_edge = _Endpoint(calls.create_edge)
    retract_edge = _Endpoint(calls.retract_edge)
    add_contributions = _Endpoint(calls.add_contributions)
    forget = _Endpoint(calls.forget)
    restore = _Endpoint(calls.restore)
    pin = _Endpoint(calls.pin)
    unpin = _Endpoint(calls.unpin)
    withdraw_proposer = _Endpoint(calls.withdraw_proposer)
    withdraw_model = _Endpoint(calls.withdraw_model)
    batch = _Endpoint(calls.batch)
    read_memory = _Endpoint(calls.read_memory)
    read_memories = _Endpoint(calls.read_memories)
    list_memories = _Endpoint(calls.list_memories)
    iter_memories = _Walk(calls.list_memories, MEMORY_PAGES)
    read_history = _Endpoint(calls.read_history)
    read_versions = _Endpoint(calls.read_versions)
    read_candidates = _Endpoint(calls.read_candidates)
    recall = _Endpoint(calls.recall, sees_writes=True)
    iter_recall = _Walk(calls.recall, RECALL_PAGES, sees_writes=True)
    read_decision = _Endpoint(calls.read_decision)
    read_revision = _Endpoint(calls.read_revision)

    # The event feed
    list_events = _Endpoint(calls.list_events)
    iter_events = _Walk(calls.list_events, EVENT_PAGES)

    async def stream_events(
        self, *, after: int = 0, limit: int | None = None
    ) -> AsyncIterator[EventPublic]:
        """The feed as it grows (Server-Sent Events), from after ``after``: endless
        without ``limit``. A dropped connection is resumed after the last event seen,
        as often as the retry policy allows in a row."""
        import httpx2  # on first use: importing the client stays light

        position, seen, drops = after, 0, 0
        while limit is None or seen < limit:
            rest = None if limit is None else limit - seen
            call = calls.stream_events(after=position, limit=rest)
            response = await self._respond(call, None, stream=True)
            parser = SseParser()
            try:
                async for line in response.aiter_lines():
                    message = parser.feed(line)
                    if message is None:
                        continue
                    event = feed_entry(message)
                    position, seen, drops = event.position, seen + 1, 0
                    yield event
            except httpx2.TransportError as error:
                if drops >= self.settings.retry.max_retries:
                    raise APIConnectionError(f"the event stream broke: {error}") from error
                await _sleep(self.settings.retry.delay(drops))
                drops += 1
            finally:
                await response.aclose()

    # The tenant
    read_retention = _Endpoint(calls.read_retention)
    update_retention = _Endpoint(calls.update_retention)
    read_judgment = _Endpoint(calls.read_judgment)
    update_judgment = _Endpoint(calls.update_judgment)
    delete_tenant = _Endpoint(calls.delete_tenant)
    erase = _Endpoint(calls.erase)
    read_erasure = _Endpoint(calls.read_erasure)
    read_forgetting_policy = _Endpoint(calls.read_forgetting_policy)
    update_forgetting_policy = _Endpoint(calls.update_forgetting_policy)
    run_cycle = _Endpoint(calls.run_cycle)
    read_cycle = _Endpoint(calls.read_cycle)

    async def export(self) -> AsyncIterator[dict[str, Any]]:
        """The tenant's export, one JSON object per line (admin): a header, every event,
        every payload that still exists, a trailer with counts."""
        response = await self._respond(calls.export(), None, stream=True)
        try:
            async for line in response.aiter_lines():
                if line:
                    yield json.loads(line)
        finally:
            await response.aclose()

    # The forgetting pass and its proposals
    list_proposals = _Endpoint(calls.list_proposals)
    iter_proposals = _Walk(calls.list_proposals, PROPOSAL_PAGES)
    read_proposal = _Endpoint(calls.read_proposal)
    apply_proposal = _Endpoint(calls.apply_proposal)
    reject_proposal = _Endpoint(calls.reject_proposal)
    record_verdicts = _Endpoint(calls.record_verdicts)
    read_judge_items = _Endpoint(calls.read_judge_items)
    run_forgetting_pass = _Endpoint(calls.run_forgetting_pass)
    evict_cache = _Endpoint(calls.evict_cache)
