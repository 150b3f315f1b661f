"""The hop to a worker thread (``api/_worker_threads.py``): what anyio's hop promised the
service is still true. Real threads and a real event loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import anyio.to_thread
import pytest

from palimpsest.api._worker_threads import in_thread

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
        # the call's own work, finishing after the caller was cancelled
        time.sleep(0.05)
        finished.append("committed")

    async def main() -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        caller = asyncio.ensure_future(in_thread(call))
        await asyncio.to_thread(_wait_until, started, "the call runs")
        caller.cancel()
        # A window in which a caller that let go of its call would be done.
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


def test_a_caller_cancelled_by_its_scope_waits_without_spinning() -> None:
    """Starlette runs a streaming answer in an anyio task group: when its client
    leaves, the scope is cancelled, and anyio cancels the task again at every turn
    of the loop. Waiting for the call must not spin a core meanwhile."""
    finished: list[str] = []
    running = threading.Event()

    def call() -> None:
        running.set()
        # a slow call: the caller is cancelled many times while it runs
        time.sleep(0.5)
        finished.append("read")

    async def main() -> float:
        async with anyio.create_task_group() as group:
            group.start_soon(in_thread, call)
            # Cancelled once its call runs (a call not yet started would not start).
            await asyncio.to_thread(_wait_until, running, "the call runs")
            group.cancel_scope.cancel()
            started = time.process_time()
        assert finished == ["read"]  # the group ended only once the call was over
        return time.process_time() - started

    cpu_s = asyncio.run(main())
    assert cpu_s < 0.1, f"{cpu_s:.2f} s of CPU while a 0.5 s call ran"


def test_a_caller_already_cancelled_does_not_start_its_call() -> None:
    ran: list[str] = []

    async def main() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await in_thread(ran.append, "a write for a client that left")
        assert scope.cancelled_caught
        assert anyio.to_thread.current_default_thread_limiter().borrowed_tokens == 0

    asyncio.run(main())
    assert ran == []


def test_a_call_raising_stop_iteration_reaches_the_caller_as_an_error() -> None:
    """asyncio cannot set StopIteration on a future: handed over as it is, the
    caller would wait forever, holding its token."""

    def call() -> None:
        next(iter(()))

    async def main() -> None:
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(in_thread(call), 10)
        assert anyio.to_thread.current_default_thread_limiter().borrowed_tokens == 0

    asyncio.run(main())
