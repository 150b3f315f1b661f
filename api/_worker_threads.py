"""The hop from the event loop to a worker thread, for every blocking call of ``api/``.

Starlette's ``run_in_threadpool`` goes through anyio's ``to_thread.run_sync``,
which turns the event loop twice more on every call (its checkpoints) and enters
a cancel scope: a tenth of a write's event-loop CPU, measured
(``docs/benchmarks.md``). :func:`in_thread` does the same job through asyncio's
executor and keeps the parts of anyio's contract this service relies on:

- **The same bound.** A call holds a token of anyio's default thread limiter
  (40 unless changed), the one FastAPI's synchronous routes and dependencies
  hold while they run: how many threads can wait on the database at once is
  the same as before, whichever way a call hops.
- **Context variables go along** (the tenant in ``projections/store/tenancy.py``).
- **A cancelled caller is not abandoned mid-call.** It waits for the call to
  finish (a write commits or not, never in the background), and is then cancelled.

What it does not give a call: anyio's worker-thread state. Code run through it
must not call ``anyio.from_thread`` (none does: the calls are the service's
synchronous reads and writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

import anyio.lowlevel
import anyio.to_thread
from anyio import WouldBlock

__all__ = ["in_thread"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

_MOST_THREADS = 256
"""A ceiling only: the limiter's tokens bound how many calls run at once, and the
executor starts a thread only when none is idle."""

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """This process's executor, made on first use."""
    global _executor  # noqa: PLW0603 (one executor a process, made when first needed)
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(_MOST_THREADS, thread_name_prefix="palimpsest-api")
        return _executor


async def in_thread(func: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Return ``func(*args, **kwargs)``, run on a worker thread with this task's context
    variables, holding a token of anyio's default thread limiter while it runs.

    A caller already cancelled by an anyio cancel scope (a request whose client
    left) is cancelled before ``func`` starts.

    Raises:
        Whatever ``func`` raises (``StopIteration`` as ``RuntimeError``, as anyio
        does: asyncio cannot hand it over); ``asyncio.CancelledError`` if the
        caller was cancelled (only once ``func`` has returned or raised).
    """
    await anyio.lowlevel.checkpoint_if_cancelled()
    limiter = anyio.to_thread.current_default_thread_limiter()
    borrower = object()  # a token per call: one task may hop from two coroutines
    try:
        limiter.acquire_on_behalf_of_nowait(borrower)
    except WouldBlock:
        await limiter.acquire_on_behalf_of(borrower)
    try:
        call = functools.partial(contextvars.copy_context().run, _called, func, args, kwargs)
        future = asyncio.get_running_loop().run_in_executor(_pool(), call)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():
                await _outlast(future)
            raise
    finally:
        limiter.release_on_behalf_of(borrower)


def _called(func: Callable[..., _T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> _T:
    try:
        return func(*args, **kwargs)
    except StopIteration as e:
        # Set on an asyncio future, it would never complete: the caller would hang.
        msg = f"{getattr(func, '__name__', func)!r} raised StopIteration"
        raise RuntimeError(msg) from e


async def _outlast(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, whatever cancellation arrives meanwhile.

    Shielded, so that a cancelled anyio scope does not cancel this task again at
    every turn of the loop (a spinning core); a plain ``Task.cancel()`` still
    interrupts the wait once per call, and the wait resumes.
    """
    with anyio.CancelScope(shield=True):
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([future])
