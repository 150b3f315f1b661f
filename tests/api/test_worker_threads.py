"""The hop to a worker thread (``api/worker_threads.py``): what anyio's hop promised the
service is still true, and a lone connection's write runs on the loop instead. Real
threads and a real event loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import anyio.to_thread
import pytest

import palimpsest.api.worker_threads
from palimpsest.api.worker_threads import LONE_LOCK_WAIT_S, in_thread, in_thread_unless_alone
from palimpsest.projections.drains.counters import WRITES_ON_LOOP, counts
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.brief_waits import WouldWaitError, brief_limit

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


def _on_loop_counts() -> dict[str, int]:
    return counts(WRITES_ON_LOOP)


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if this process's server had one open connection (``palimpsest.api.connections`` is
    tested against a real ``serve`` in tests/api/cli/test_serve_loop_writes.py)."""
    monkeypatch.setattr(palimpsest.api.worker_threads, "open_connections", lambda: 1)


@pytest.mark.usefixtures("alone")
def test_a_lone_connections_write_runs_on_the_loop_briefly_in_a_copy_of_its_context(
    runtime: Runtime,
) -> None:
    seen: list[tuple[str, float | None, str]] = []

    def write() -> str:
        seen.append((_request.get(), brief_limit(), threading.current_thread().name))
        _request.set("changed by the write")
        return "written"

    async def main() -> str:
        _request.set("tenant a")
        answer = await in_thread_unless_alone(runtime.log.datastore, write)
        assert _request.get() == "tenant a"
        return answer

    before = _on_loop_counts()
    assert asyncio.run(main()) == "written"
    assert seen == [("tenant a", LONE_LOCK_WAIT_S, threading.current_thread().name)]
    assert brief_limit() is None
    assert _on_loop_counts().get("ran", 0) == before.get("ran", 0) + 1


@pytest.mark.usefixtures("alone")
def test_a_write_that_would_wait_runs_again_on_a_thread_without_the_limit(
    runtime: Runtime,
) -> None:
    calls: list[tuple[float | None, str]] = []

    def write() -> str:
        calls.append((brief_limit(), threading.current_thread().name))
        if len(calls) == 1:
            raise WouldWaitError("the events table is held")
        return "written"

    before = _on_loop_counts()
    assert asyncio.run(in_thread_unless_alone(runtime.log.datastore, write)) == "written"
    (limit_here, loop), (limit_there, thread) = calls
    assert (limit_here, limit_there) == (LONE_LOCK_WAIT_S, None)
    assert loop == threading.current_thread().name and thread != loop
    after = _on_loop_counts()
    assert after.get("handed_to_thread", 0) == before.get("handed_to_thread", 0) + 1
    assert after.get("ran", 0) == before.get("ran", 0)


@pytest.mark.usefixtures("alone")
def test_a_write_refused_on_the_loop_is_refused_once(runtime: Runtime) -> None:
    calls: list[str] = []

    def write() -> str:
        calls.append(threading.current_thread().name)
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        asyncio.run(in_thread_unless_alone(runtime.log.datastore, write))
    assert calls == [threading.current_thread().name]


@pytest.mark.parametrize("connections", [None, 2])
def test_a_write_beside_other_connections_or_outside_serve_hops(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, connections: int | None
) -> None:
    monkeypatch.setattr(palimpsest.api.worker_threads, "open_connections", lambda: connections)
    where = asyncio.run(
        in_thread_unless_alone(runtime.log.datastore, lambda: threading.current_thread().name)
    )
    assert where != threading.current_thread().name
