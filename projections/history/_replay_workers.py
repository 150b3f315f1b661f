"""Replaying tenants in parallel, all at one pinned log position.

Rebuild and verify are CPU-bound in Python (decoding events, replaying
aggregates, projecting beliefs), so they spread tenants over worker
processes. Every worker reads in the coordinator's exported snapshot
(``SET TRANSACTION SNAPSHOT``), so all of them see exactly the same log
prefix and the same live tables. With one worker, it runs in a thread of
the calling process: the same code, no process to start.

A worker is driven over a pipe. Its :class:`WorkerPlan` comes first (so a
process can start, and import, before the snapshot exists); then commands:

- ``("replay", head)``: replay its tenants up to ``head`` (in the snapshot),
  sending ``("progress", events)`` as it goes, then run its task's
  ``after_replay`` in the same snapshot and send ``("replayed", result)``;
- ``("catch_up", position, new_tenants)``: (rebuild only) replay what was
  committed since, in a fresh transaction, and send ``("caught_up", result)``;
- ``("stop",)``.

Errors are sent back as ``("error", message)`` and end the worker.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.connection
import os
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol
from uuid import UUID

import psycopg
from eventsourcing.persistence import Mapper

from palimpsest.projections.history.log_scan import Progress, replay_tenant
from palimpsest.projections.store.eventlog import event_mapper
from palimpsest.projections.views.read_models import TenantReadModels

__all__ = ["ReplayTask", "WorkerPlan", "WorkerPool", "default_workers", "split_tenants"]


def default_workers() -> int:
    """Return the number of workers to use by default: one per core."""
    return max(1, os.cpu_count() or 1)


class ReplayTask(Protocol):
    """What a worker does with its replayed tenants (picklable: it crosses processes)."""

    def after_replay(
        self, conn: psycopg.Connection[Any], mapper: Mapper[UUID], models: list[TenantReadModels]
    ) -> Any:
        """Run in the snapshot, after the replay; the result is sent back."""

    def after_catch_up(
        self,
        conn: psycopg.Connection[Any],
        mapper: Mapper[UUID],
        changed: list[TenantReadModels],
    ) -> Any:
        """Run in a committed transaction after a catch-up, for tenants that changed."""


@dataclass(frozen=True)
class WorkerPlan:
    """One worker's share: where to connect, which snapshot, which tenants."""

    conninfo: dict[str, Any]
    schema: str
    snapshot: str
    tenants: tuple[UUID, ...]
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


def _serve(plan: WorkerPlan, pipe: Connection) -> None:
    mapper = event_mapper()
    models = {t: TenantReadModels(t) for t in plan.tenants}
    progress = _Progress(pipe)
    with psycopg.connect(**plan.conninfo, autocommit=True) as conn:
        while True:
            command = pipe.recv()
            if command[0] == "stop":
                return
            if command[0] == "replay":
                with _cyclic_gc_paused(), conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    conn.execute(
                        psycopg.sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                            psycopg.sql.Literal(plan.snapshot)
                        )
                    )
                    for tenant in models.values():
                        replay_tenant(
                            conn, plan.schema, mapper, tenant, upto=command[1], progress=progress
                        )
                    progress.flush()
                    result = plan.task.after_replay(conn, mapper, list(models.values()))
                pipe.send(("replayed", result))
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

    ``start`` launches them; ``assign`` gives each its plan (an empty one
    leaves it idle). More than one worker runs as processes; one runs as a
    thread of this process.
    """

    workers: int
    _pipes: list[Connection] = field(default_factory=list)
    _runners: list[Any] = field(default_factory=list)

    @property
    def processes(self) -> bool:
        """Return whether the workers are processes (more than one) or a thread."""
        return self.workers > 1

    def start(self) -> None:
        """Start every worker."""
        context = multiprocessing.get_context("spawn")
        for _ in range(self.workers):
            ours, theirs = multiprocessing.Pipe()
            runner: Any
            if self.processes:
                runner = context.Process(target=_process_main, args=(theirs,), daemon=True)
            else:
                runner = threading.Thread(target=_work, args=(theirs,), daemon=True)
            runner.start()
            self._pipes.append(ours)
            self._runners.append(runner)

    def assign(self, plans: list[WorkerPlan]) -> None:
        """Send each worker its plan, in order."""
        for pipe, plan in zip(self._pipes, plans, strict=True):
            pipe.send(plan)

    def run(
        self,
        commands: list[tuple[Any, ...]],
        done: str,
        progress: Callable[[int], None] = lambda _: None,
    ) -> list[Any]:
        """Send each worker its command and collect each one's ``done`` result.

        Raises:
            RuntimeError: a worker failed (its message and traceback included).
        """
        for pipe, command in zip(self._pipes, commands, strict=True):
            pipe.send(command)
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
        drops the tables they were writing. A thread worker is waited for.
        """
        for pipe in self._pipes:
            with contextlib.suppress(OSError):  # the worker is gone already
                pipe.send(("stop",))
        for runner in self._runners:
            if at_once and self.processes:
                runner.kill()
            runner.join(timeout=10)
            if self.processes and runner.is_alive():
                runner.kill()


def split_tenants(sizes: dict[UUID, int], workers: int) -> list[tuple[UUID, ...]]:
    """Return up to ``workers`` disjoint, non-empty groups of tenants, balanced by size
    (largest first, each to the lightest group)."""
    groups: list[list[UUID]] = [[] for _ in range(max(1, min(workers, len(sizes))))]
    loads = [0] * len(groups)
    for tenant, size in sorted(sizes.items(), key=lambda item: (-item[1], str(item[0]))):
        lightest = loads.index(min(loads))
        groups[lightest].append(tenant)
        loads[lightest] += size
    return [tuple(g) for g in groups if g]
