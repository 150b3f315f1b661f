"""Replaying tenants in parallel, all at one pinned log position.

Rebuild and verify are CPU-bound in Python (decoding events, replaying
aggregates, projecting beliefs), so they spread tenants over worker
processes. Every worker reads in the coordinator's exported snapshot
(``SET TRANSACTION SNAPSHOT``), so all of them see exactly the same log
prefix and the same live tables. The first worker runs in a thread of the
calling process (the same code, no process to start: it replays while the
others still import); the others are processes.

A worker is driven over a pipe. Its :class:`WorkerPlan` comes first (so a
process can start, and import, before the snapshot exists); then commands:

- ``("replay", head)``: take tenants one at a time (``("next",)``, answered
  ``("tenant", id)``, or ``("tenant", None)`` when none is left), replay each
  up to ``head`` (in the snapshot), sending ``("progress", events)`` as it
  goes, and run its task's ``after_replay`` on it in the same snapshot; then
  send ``("replayed", results)``. Tenants are handed out largest first to
  whichever worker asks, so a worker that started late, or drew slow tenants,
  takes fewer;
- ``("catch_up", position, new_tenants)``: (rebuild only) replay what was
  committed since, in a fresh transaction, for the tenants it replayed and
  ``new_tenants``, and send ``("caught_up", result)``;
- ``("stop",)``, also as the answer to ``("next",)`` when the run is abandoned.

Errors are sent back as ``("error", message)`` and end the worker.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol
from uuid import UUID

import psycopg
from eventsourcing.persistence import Mapper

from palimpsest.projections.history._replay_mapper import replay_mapper
from palimpsest.projections.history.log_scan import Progress, replay_tenant
from palimpsest.projections.views.read_models import TenantReadModels

__all__ = [
    "ReplayTask",
    "WorkerPlan",
    "WorkerPool",
    "default_workers",
    "largest_first",
]


def default_workers() -> int:
    """Return the number of workers to use by default: one per core."""
    return max(1, os.cpu_count() or 1)


class ReplayTask(Protocol):
    """What a worker does with its replayed tenants (picklable: it crosses processes)."""

    def after_replay(
        self, conn: psycopg.Connection[Any], mapper: Mapper[UUID], models: list[TenantReadModels]
    ) -> Any:
        """Run in the snapshot, after each tenant's replay (``models`` holds that
        tenant); the results are sent back, one per tenant."""

    def after_catch_up(
        self,
        conn: psycopg.Connection[Any],
        mapper: Mapper[UUID],
        changed: list[TenantReadModels],
    ) -> Any:
        """Run in a committed transaction after a catch-up, for tenants that changed."""


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker is told first: where to connect, which snapshot, what to do
    with each tenant (the tenants come one at a time, see the module)."""

    conninfo: dict[str, Any]
    schema: str
    snapshot: str
    task: ReplayTask


class _Progress(Progress):
    """Progress that forwards counts over the pipe (at most every 2,000 events)."""

    def __init__(self, pipe: Connection) -> None:
        super().__init__("worker", 0, lambda _: None)
        self._pipe = pipe
        self._unsent = 0

    def advance(self, events: int) -> None:
        self._unsent += events
        if self._unsent >= 2000:
            self.flush()

    def flush(self) -> None:
        if self._unsent:
            self._pipe.send(("progress", self._unsent))
            self._unsent = 0


def _work(pipe: Connection) -> None:
    """The worker's loop (a process's target, or a thread's): its plan comes first,
    so processes can start (and import) while the coordinator still prepares."""
    try:
        plan = pipe.recv()
        _serve(plan, pipe)
    except BaseException as e:  # reported to the coordinator, which decides
        pipe.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def _process_main(pipe: Connection) -> None:
    """A worker process: work, then exit at once. Tearing down an interpreter that
    holds a replayed store costs seconds and leaves nothing to flush."""
    _work(pipe)
    pipe.close()
    os._exit(0)


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while replaying.

    A replay allocates millions of long-lived objects (aggregates, rows); every
    full collection walks all of them, which made replay 1.7 times slower. The
    objects are freed by reference counting; nothing here relies on the
    collector.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _next_tenant(pipe: Connection) -> UUID | None:
    """Ask the coordinator for a tenant to replay; None when none is left.

    Raises:
        psycopg.Rollback: told to stop instead (the run is abandoned): the
            transaction it is raised in rolls back, and nothing copied remains.
    """
    pipe.send(("next",))
    answer = pipe.recv()
    if answer[0] != "tenant":
        raise psycopg.Rollback
    tenant: UUID | None = answer[1]
    return tenant


def _serve(plan: WorkerPlan, pipe: Connection) -> None:
    mapper = replay_mapper()
    models: dict[UUID, TenantReadModels] = {}
    progress = _Progress(pipe)
    with psycopg.connect(**plan.conninfo, autocommit=True) as conn:
        while True:
            command = pipe.recv()
            if command[0] == "stop":
                return
            if command[0] == "replay":
                results: list[Any] | None = None
                with _cyclic_gc_paused(), conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    conn.execute(
                        psycopg.sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                            psycopg.sql.Literal(plan.snapshot)
                        )
                    )
                    replayed = []
                    while (tenant_id := _next_tenant(pipe)) is not None:
                        tenant = models[tenant_id] = TenantReadModels(tenant_id)
                        upto = command[1]
                        replay_tenant(
                            conn, plan.schema, mapper, tenant, upto=upto, progress=progress
                        )
                        progress.flush()
                        replayed.append(plan.task.after_replay(conn, mapper, [tenant]))
                    results = replayed
                if results is None:
                    return  # told to stop: the transaction rolled back
                pipe.send(("replayed", results))
            elif command[0] == "catch_up":
                for tenant_id in command[2]:
                    models[tenant_id] = TenantReadModels(tenant_id)
                changed = []
                with _cyclic_gc_paused(), conn.transaction():
                    for tenant in models.values():
                        before = tenant.position
                        replay_tenant(conn, plan.schema, mapper, tenant, upto=command[1])
                        if tenant.position != before:
                            changed.append(tenant)
                    result = plan.task.after_catch_up(conn, mapper, changed)
                pipe.send(("caught_up", result))


@dataclass
class WorkerPool:
    """Workers replaying disjoint sets of tenants, driven together.

    ``start`` launches them; ``assign`` gives every one the plan. The first
    runs as a thread of this process, the others as processes.
    """

    workers: int
    _pipes: list[Connection] = field(default_factory=list)
    _runners: list[Any] = field(default_factory=list)

    def start(self) -> None:
        """Start every worker."""
        context = multiprocessing.get_context("spawn")
        for index in range(self.workers):
            ours, theirs = multiprocessing.Pipe()
            runner: Any
            if index == 0:
                runner = threading.Thread(target=_work, args=(theirs,), daemon=True)
            else:
                runner = context.Process(target=_process_main, args=(theirs,), daemon=True)
            runner.start()
            self._pipes.append(ours)
            self._runners.append(runner)

    def assign(self, plan: WorkerPlan) -> None:
        """Send every worker the plan."""
        for pipe in self._pipes:
            pipe.send(plan)

    def run(
        self,
        commands: list[tuple[Any, ...]],
        done: str,
        progress: Callable[[int], None] = lambda _: None,
        tenants: Sequence[UUID] = (),
    ) -> list[Any]:
        """Send each worker its command and collect each one's ``done`` result,
        handing out ``tenants``, in order, to the workers that ask (a replay).

        Raises:
            RuntimeError: a worker failed (its message and traceback included).
        """
        for pipe, command in zip(self._pipes, commands, strict=True):
            pipe.send(command)
        waiting_tenants = list(reversed(tenants))
        results: dict[int, Any] = {}
        while len(results) < len(self._pipes):
            waiting = [p for i, p in enumerate(self._pipes) if i not in results]
            for ready in multiprocessing.connection.wait(waiting):
                assert isinstance(ready, Connection)
                try:
                    kind, *payload = ready.recv()
                except (EOFError, OSError) as e:
                    msg = "a replay worker exited without a word (killed, or out of memory?)"
                    raise RuntimeError(msg) from e
                if kind == "progress":
                    progress(payload[0])
                elif kind == "next":
                    ready.send(("tenant", waiting_tenants.pop() if waiting_tenants else None))
                elif kind == "error":
                    msg = f"a replay worker failed: {payload[0]}"
                    raise RuntimeError(msg)
                else:
                    assert kind == done, kind
                    results[self._pipes.index(ready)] = payload[0]
        return [results[i] for i in range(len(self._pipes))]

    def stop(self, *, at_once: bool = False) -> None:
        """Stop every worker (killing processes that do not stop within 10 s).

        ``at_once`` kills worker processes straight away (their transactions roll
        back as their connections close): what an interrupted run needs before it
        drops the tables they were writing. The thread worker is waited for: it
        stops, rolling back, when it next asks for a tenant.
        """
        for pipe in self._pipes:
            with contextlib.suppress(OSError):  # the worker is gone already
                pipe.send(("stop",))
        for runner in self._runners:
            process = isinstance(runner, multiprocessing.process.BaseProcess)
            if at_once and process:
                runner.kill()
            runner.join(timeout=10)
            if process and runner.is_alive():
                runner.kill()


def largest_first(sizes: dict[UUID, int]) -> list[UUID]:
    """Return the tenants in the order workers take them: largest first (a large
    tenant taken last would keep one worker busy after the others are done)."""
    return [t for t, _ in sorted(sizes.items(), key=lambda item: (-item[1], str(item[0])))]
