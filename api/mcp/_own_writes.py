"""Read your writes over MCP: ``recall`` waits until the caller's own writes are
indexed, without the agent passing anything.

An agent that remembers something and recalls it at once must find it, but a write
answers once its events commit, and recall finds a memory only once the drains
have published and indexed it. The HTTP API leaves it to its caller to send the
``position`` of its last write as ``after`` (the Python client does it by itself);
no tool argument can ask a model to do that bookkeeping. So the server does it:
every write a caller makes through the tools notes its position here, and the
caller's next ``recall`` first waits, as the HTTP API's ``after`` does (at most
:data:`~palimpsest.projections.recall.caught_up.WAIT_S`, holding no thread), until
every write up to it is indexed.

Whose writes: the caller's principal's (its tokens), in this process. ``/mcp`` is
stateless, so there is no session to keep them in; over stdio the process is the
session, and acts as one token. A deployment of several processes behind a proxy
waits only for the writes made through the one answering (another process's
write is found once its drains index it, as over HTTP without ``after``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.api._waiting import await_drains
from palimpsest.api._worker_threads import in_thread
from palimpsest.projections.recall.caught_up import WAIT_S, caught_up

if TYPE_CHECKING:
    from palimpsest.projections.commands.caller import Caller
    from palimpsest.projections.runtime import Runtime

__all__ = ["LOAD_WAIT_S", "MAX_WRITERS", "WrittenPositions", "await_own_writes"]

LOAD_WAIT_S = 120.0
"""How long a recall waits for the embedding model to load before its wait for the
caller's writes begins (loading all-MiniLM-L6-v2 takes 2-20 s on a CPU)."""

MAX_WRITERS = 10_000
"""The most principals whose last write one process remembers; past it the one that
wrote least recently is forgotten (its next recall then does not wait)."""


class WrittenPositions:
    """The highest log position each principal wrote through this process's tools.

    Safe to share between threads (tools run on worker threads); bounded by
    ``max_writers`` principals."""

    def __init__(self, max_writers: int = MAX_WRITERS) -> None:
        self._lock = threading.Lock()
        self._positions: OrderedDict[tuple[UUID, UUID], int] = OrderedDict()
        self._max_writers = max_writers

    def note(self, caller: Caller, position: int) -> None:
        """Note that ``caller`` wrote at ``position`` (a lower one than noted changes
        nothing: two writes answered at once)."""
        key = (caller.tenant_id, caller.principal_id)
        with self._lock:
            self._positions[key] = max(position, self._positions.get(key, position))
            self._positions.move_to_end(key)
            while len(self._positions) > self._max_writers:
                self._positions.popitem(last=False)

    def of(self, caller: Caller) -> int | None:
        """The highest position ``caller`` wrote at (None: nothing noted)."""
        with self._lock:
            return self._positions.get((caller.tenant_id, caller.principal_id))


async def await_own_writes(
    runtime: Runtime, caller: Caller, after: int | None, *, wait: bool
) -> bool | None:
    """Wait until every write of ``caller``'s tenant up to position ``after`` (the last
    one ``caller`` made, from :meth:`WrittenPositions.of`) is indexed, at most
    :data:`WAIT_S`, holding no thread; return whether it is (None: nothing to wait for),
    as the HTTP API's ``caught_up`` says it. Without ``wait`` (no drain is known to run
    here, so nothing would end a wait), look once."""
    if after is None:
        return None

    def check() -> bool:
        return caught_up(runtime.log, caller.tenant_id, after)

    if not wait:
        return await in_thread(check)
    load = runtime.embedder_load_ended
    if load is not None and not load.is_set():
        # Nothing is indexed before the model has loaded (``palimpsest mcp`` loads it
        # once it answers), and the recall needs it for its query anyway: the bound
        # starts once it has.
        await in_thread(load.wait, LOAD_WAIT_S)
    return await await_drains(runtime, caller.tenant_id, check, bool, WAIT_S)
