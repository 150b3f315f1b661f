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

- ``("replay", head)``: take units one at a time (``("next",)``, answered
  ``("tenant", unit)``, or ``("tenant", None)`` when none is left), replay each
  up to ``head`` (in the snapshot), sending ``("progress", events)`` as it
  goes, and run its task's ``after_replay`` on it in the same snapshot; then
  send ``("replayed", results)``. A unit is a tenant, or one part of a large
  one (:func:`replay_units`). Units are handed out largest first to whichever
  worker asks, so a worker that started late, or drew slow tenants, takes
  fewer. A part is kept aside once replayed and reported (``("part", tenant,
  clean)``); when every part of its tenant has been reported the coordinator
  sends ``("verdict", tenant, keep)`` to the workers holding them: each part
  goes on to ``after_replay``, or, when a part met an event it could not
  decode or apply (:mod:`~palimpsest.projections.views.read_model_parts`),
  all are dropped and the whole tenant is handed out as one more unit. The
  coordinator answers ``("next",)`` with None only once no verdict is
  outstanding;
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
from palimpsest.projections.views.read_model_parts import TenantPart
from palimpsest.projections.views.read_models import TenantReadModels

__all__ = [
    "ReplayTask",
    "SPLIT_FROM",
    "Unit",
    "WorkerPlan",
    "WorkerPool",
    "default_workers",
    "largest_first",
    "replay_units",
    "workers_for",
]


SPLIT_FROM = 50_000
"""From how many events a tenant may be replayed in parts. A worker process starts
(spawns and imports) about 1.4 s after the run: a smaller tenant is replayed by the
first worker in about that time."""


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


Unit = tuple[UUID, TenantPart | None]
"""What a worker replays at once: a tenant, whole (None) or one part of it."""


def _receive(pipe: Connection) -> Any:
    """Return the coordinator's next message.

    Raises:
        psycopg.Rollback: told to stop instead (the run is abandoned): the
            transaction it is raised in rolls back, and nothing copied remains.
    """
    message = pipe.recv()
    if message[0] == "stop":
        raise psycopg.Rollback
    return message


class _Replay:
    """One ``replay`` command in a worker: its units, the parts awaiting their verdict,
    and what ``after_replay`` answered."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        plan: WorkerPlan,
        pipe: Connection,
        models: dict[tuple[UUID, int], TenantReadModels],
        mapper: Mapper[UUID],
    ) -> None:
        self.conn, self.plan, self.pipe, self.models = conn, plan, pipe, models
        self.mapper = mapper
        self.progress = _Progress(pipe)
        self.waiting: dict[tuple[UUID, int], TenantReadModels] = {}
        self.results: list[Any] = []

    def run(self, head: int) -> list[Any]:
        while True:
            self.pipe.send(("next",))
            while (answer := _receive(self.pipe))[0] == "verdict":
                self._settle(answer[1], answer[2])
            unit: Unit | None = answer[1]
            if unit is None:
                break
            self._replay(unit, head)
        # The coordinator answers None once every verdict has been sent.
        assert not self.waiting, self.waiting
        return self.results

    def _replay(self, unit: Unit, head: int) -> None:
        tenant_id, part = unit
        tenant = TenantReadModels(tenant_id, part=part)
        replay_tenant(
            self.conn, self.plan.schema, self.mapper, tenant, upto=head, progress=self.progress
        )
        self.progress.flush()
        if part is None:
            self._keep((tenant_id, 0), tenant)
            return
        self.waiting[(tenant_id, part.index)] = tenant
        self.pipe.send(("part", tenant_id, not tenant.unreadable))

    def _settle(self, tenant_id: UUID, keep: bool) -> None:
        for key in [key for key in self.waiting if key[0] == tenant_id]:
            tenant = self.waiting.pop(key)
            if keep:
                self._keep(key, tenant)

    def _keep(self, key: tuple[UUID, int], tenant: TenantReadModels) -> None:
        self.models[key] = tenant
        self.results.append(self.plan.task.after_replay(self.conn, self.mapper, [tenant]))


def _serve(plan: WorkerPlan, pipe: Connection) -> None:
    mapper = replay_mapper()
    models: dict[tuple[UUID, int], TenantReadModels] = {}
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
                    results = _Replay(conn, plan, pipe, models, mapper).run(command[1])
                if results is None:
                    return  # told to stop: the transaction rolled back
                pipe.send(("replayed", results))
            elif command[0] == "catch_up":
                for tenant_id in command[2]:
                    models[(tenant_id, 0)] = TenantReadModels(tenant_id)
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
class _Handout:
    """The coordinator's side of a replay's units: who asks for one, which split
    tenants await parts' reports, and the verdicts (see the module)."""

    units: list[Unit]
    asking: list[Connection] = field(default_factory=list)
    parts_left: dict[UUID, int] = field(default_factory=dict)
    reports: dict[UUID, list[tuple[Connection, bool]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for tenant_id, part in self.units:
            if part is not None:
                self.parts_left[tenant_id] = part.count
        self.units.reverse()  # handed out from the end

    def reported(self, pipe: Connection, tenant_id: UUID, *, clean: bool) -> None:
        """Note a replayed part; once its tenant's last is in, send the verdict to
        every worker holding one, and hand the tenant out whole if one was not clean."""
        held = self.reports.setdefault(tenant_id, [])
        held.append((pipe, clean))
        self.parts_left[tenant_id] -= 1
        if self.parts_left[tenant_id]:
            return
        del self.parts_left[tenant_id]
        keep = all(clean for _, clean in held)
        for holder in dict.fromkeys(p for p, _ in held):
            holder.send(("verdict", tenant_id, keep))
        if not keep:
            self.units.append((tenant_id, None))

    def answer(self) -> None:
        """Give the workers asking a unit each while any is left; None once none is
        left and no verdict is outstanding (a dropped tenant comes back as a unit)."""
        while self.asking and self.units:
            self.asking.pop(0).send(("tenant", self.units.pop()))
        if not self.units and not self.parts_left:
            for pipe in self.asking:
                pipe.send(("tenant", None))
            self.asking.clear()


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
        units: Sequence[Unit] = (),
    ) -> list[Any]:
        """Send each worker its command and collect each one's ``done`` result,
        handing out ``units``, in order, to the workers that ask (a replay), and
        judging the parts of split tenants (see the module).

        Raises:
            RuntimeError: a worker failed (its message and traceback included).
        """
        for pipe, command in zip(self._pipes, commands, strict=True):
            pipe.send(command)
        handout = _Handout(list(units))
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
                    handout.asking.append(ready)
                elif kind == "part":
                    handout.reported(ready, payload[0], clean=payload[1])
                elif kind == "error":
                    msg = f"a replay worker failed: {payload[0]}"
                    raise RuntimeError(msg)
                else:
                    assert kind == done, kind
                    results[self._pipes.index(ready)] = payload[0]
                handout.answer()
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


def replay_units(sizes: dict[UUID, int], workers: int, *, split_from: int) -> list[Unit]:
    """Return what workers replay, in the order they take it: tenants largest first,
    a tenant in ``workers`` parts (consecutive) when it has at least ``split_from``
    events and more than a worker's share of the store's."""
    total = sum(sizes.values())
    units: list[Unit] = []
    for tenant_id in largest_first(sizes):
        size = sizes[tenant_id]
        if workers > 1 and size >= split_from and size * workers > total:
            units.extend((tenant_id, TenantPart(i, workers)) for i in range(workers))
        else:
            units.append((tenant_id, None))
    return units


def workers_for(sizes: dict[UUID, int], workers: int, *, split_from: int) -> int:
    """Return how many of ``workers`` a replay of tenants of ``sizes`` can keep busy:
    no more than the units it makes (:func:`replay_units`), at least one."""
    return max(1, min(workers, len(replay_units(sizes, workers, split_from=split_from))))
