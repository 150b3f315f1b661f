"""The hop to a worker thread (``api/worker_threads.py``): what anyio's hop promised the
service is still true. Real threads and a real event loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import anyio.to_thread
import pytest

from api.worker_threads import in_thread

_request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


def _wait_until(condition: threading.Event, what: str) -> None:
    if not condition.wait(10):
        pytest.fail(f"timed out waiting until {what}")


def test_the_callers_context_variables_go_along_and_do_not_come_back() -> None:
    seen: list[str] = []

    def call() -> str:
        seen.append(_request.get())
        _request.set("changed in the thread")
        return threading.current_thread().name

    async def main() -> str:
        _request.set("tenant a")
        name = await in_thread(call)
        assert _request.get() == "tenant a"
        return name

    name = asyncio.run(main())
    assert seen == ["tenant a"]
    assert name != threading.current_thread().name


def test_calls_and_fastapis_own_thread_work_share_one_bound() -> None:
    """The threads that can wait on the database at once are bounded by anyio's
    limiter, whichever way a call hops: FastAPI's synchronous routes use it too."""
    running, most = 0, 0
    lock = threading.Lock()
    release = threading.Event()
    two_running = threading.Event()

    def call() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            if running == 2:
                two_running.set()
        release.wait(10)
        with lock:
            running -= 1

    async def main() -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = 2
        calls = [asyncio.ensure_future(in_thread(call)) for _ in range(3)]
        calls.append(asyncio.ensure_future(anyio.to_thread.run_sync(call)))
        await asyncio.to_thread(_wait_until, two_running, "two calls run")
        await asyncio.sleep(0.2)  # a third would have started by now
        assert limiter.borrowed_tokens == 2
        assert most == 2
        release.set()
        await asyncio.gather(*calls)
        assert limiter.borrowed_tokens == 0

    asyncio.run(main())
    assert most == 2


def test_a_cancelled_caller_waits_for_its_call_then_is_cancelled() -> None:
    """A client that disconnects mid-write: the write is not left running in the
    background with its token given back; the caller is cancelled once it is over."""
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def call() -> None:
        started.set()
        release.wait(10)
        time.sleep(0.05)
        finished.append("committed")

    async def main() -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        caller = asyncio.ensure_future(in_thread(call))
        await asyncio.to_thread(_wait_until, started, "the call runs")
        caller.cancel()
        await asyncio.sleep(0.1)
        assert not caller.done()  # still waiting for its call
        caller.cancel()  # cancelled again meanwhile (as anyio's scopes do)
        await asyncio.sleep(0.1)
        assert not caller.done()
        assert limiter.borrowed_tokens == 1
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert finished == ["committed"]
        assert limiter.borrowed_tokens == 0

    asyncio.run(main())


def test_what_the_call_raises_reaches_the_caller_and_its_token_comes_back() -> None:
    def call() -> None:
        raise LookupError("no such memory")

    async def main() -> None:
        with pytest.raises(LookupError):
            await in_thread(call)
        assert anyio.to_thread.current_default_thread_limiter().borrowed_tokens == 0

    asyncio.run(main())
