"""Groups sent ahead: once a group's transaction is sent, the next group is led and
sent while PostgreSQL runs it, up to ``GroupCommit.ahead`` of them, and the events
table's lock orders them. Each write is still answered after its own commit, with
its own positions, and a write of what a group ahead writes waits for it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import VersionSpec
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.eventlog import GROUPS_AHEAD, PAYLOADS_UNDER_LOCK_BYTES
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.conftest import (
    Tenant,
    count_events,
    fact_spec,
    library_writer,
    logged_position,
    logged_version,
    wait_until,
    waiting_for_the_events_table,
)
from tests.projections.commands.test_group_commit import _started

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import GroupCommit


@contextmanager
def _window(group: GroupCommit, window_s: float) -> Iterator[None]:
    """Within the block, a group waits up to ``window_s`` for writes being built."""
    before, group.window_s = group.window_s, window_s
    try:
        yield
    finally:
        group.window_s = before


def _waiting(runtime: Runtime, count: int) -> Callable[[], bool]:
    """Whether ``count`` writes wait for the events table's lock (held by the test)."""
    return lambda: waiting_for_the_events_table(runtime) == count


def test_groups_are_sent_ahead_up_to_the_bound_and_each_write_gets_its_own_positions(
    runtime: Runtime, tenant: Tenant
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    schema, group = runtime.database.schema, runtime.log.group
    assert group.ahead == GROUPS_AHEAD >= 2
    group.sizes.clear()
    created = count_events(runtime, tenant, "MemoryCreated")
    outcomes: dict[str, Any] = {}

    def write(name: str) -> Any:
        spec = fact_spec(f"written by {name}")
        return _started(outcomes, name, lambda: writer.write(caller, [spec], batch=False))

    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        # Each write that arrives while the groups before it wait in PostgreSQL is
        # sent too: it does not queue in this process behind them.
        threads = []
        for i in range(GROUPS_AHEAD):
            threads.append(write(f"ahead{i}"))
            wait_until(_waiting(runtime, i + 1), 10, f"write {i} is sent and waits for the table")
        # Beyond the bound, the writes queue here for one group, led by the first.
        threads += [write(f"queued{i}") for i in range(4)]
        wait_until(lambda: group.queued == 4, 10, f"four writes queue: {group.queued} {outcomes}")
        time.sleep(0.3)  # a window in which a fifth write, wrongly sent, would reach the table
        assert waiting_for_the_events_table(runtime) == GROUPS_AHEAD
        assert outcomes == {}  # nothing is answered before it commits
        holder.commit()
    for thread in threads:
        thread.join(30)

    assert all(o.status_code == 201 for o in outcomes.values()), outcomes
    positions = [o.body["position"] for o in outcomes.values()]
    assert len(set(positions)) == len(positions) == GROUPS_AHEAD + 4
    for outcome in outcomes.values():
        assert outcome.body["position"] == logged_position(runtime, outcome.body["id"])
    # The writes sent ahead went alone; the four queued went as one group.
    assert list(group.sizes) == [4]
    assert count_events(runtime, tenant, "MemoryCreated") == created + GROUPS_AHEAD + 4


def test_a_write_of_what_a_group_ahead_writes_waits_for_it_then_commits_after_it(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Refused at once, it would be built again from the version the group ahead
    has not committed yet, and refused again until its writer gave up (409)."""
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    revised = uuid.UUID(
        writer.write(caller, [fact_spec("The build takes 4 minutes")], batch=False).body["id"]
    )
    schema, group = runtime.database.schema, runtime.log.group
    recorder = runtime.log.recorder
    isolated_before = recorder.isolated_groups  # type: ignore[attr-defined]
    outcomes: dict[str, Any] = {}

    def write(name: str, spec: Any) -> Any:
        return _started(outcomes, name, lambda: writer.write(caller, [spec], batch=False))

    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first", VersionSpec(revised, "5 minutes", (), None, 1.0))]
        wait_until(
            lambda: waiting_for_the_events_table(runtime) == 1, 10, "the first version is sent"
        )
        # Built from the same version as the first: it leads the next group, and
        # waits for the first to be answered instead of being sent behind it ...
        threads.append(write("second", VersionSpec(revised, "6 minutes", (), None, 1.0)))
        wait_until(lambda: group.leading, 10, "the second leads")
        # a window in which the second, wrongly sent behind the first, would wait too
        time.sleep(0.3)
        assert group.leading and waiting_for_the_events_table(runtime) == 1
        # ... with the lead: a write of another memory queues behind it.
        threads.append(write("neighbour", fact_spec("Another memory")))
        wait_until(lambda: group.queued == 1, 10, "the neighbour queues behind the second")
        time.sleep(0.3)  # a window in which the neighbour, wrongly sent, would wait too
        assert waiting_for_the_events_table(runtime) == 1
        assert outcomes == {}
        holder.commit()
    for thread in threads:
        thread.join(30)

    assert all(o.status_code == 201 for o in outcomes.values()), outcomes
    assert outcomes["second"].body["position"] > outcomes["first"].body["position"]
    # Refused by this process once the first had committed (so built again from
    # it), never by the database: no group was inserted one savepoint per write.
    assert recorder.isolated_groups == isolated_before  # type: ignore[attr-defined]
    assert logged_version(runtime, revised) == 4  # created (2 events), then both versions


def test_a_group_storing_what_a_group_ahead_stores_waits_for_it_instead_of_deadlocking(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The same words in two memories are one payload row. A group whose content is
    over the size stored under the lock inserts it before taking the lock; sent
    behind a group that inserts it under the lock, each would wait for the other
    until PostgreSQL's deadlock check (a second) broke one off."""
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    schema, group = runtime.database.schema, runtime.log.group
    words = f"The same words {uuid.uuid4()}"
    outcomes: dict[str, Any] = {}

    def write(name: str, content: str) -> Any:
        spec = fact_spec(content)
        return _started(outcomes, name, lambda: writer.write(caller, [spec], batch=False))

    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("small", words)]  # stored under the lock, once it has it
        wait_until(_waiting(runtime, 1), 10, "the first write is sent")
        # The twin leads the next group and waits for a write being built: the
        # large one, which joins it.
        with _window(group, 3.0), group.building():
            threads.append(write("twin", words))
            wait_until(lambda: group.leading, 10, "the twin leads the next group")
            threads.append(write("large", "x" * (PAYLOADS_UNDER_LOCK_BYTES + 1)))
            wait_until(lambda: group.queued == 2, 10, "the large write queues with it")
        wait_until(lambda: group.queued == 0, 10, "the twin takes both into its group")
        time.sleep(0.3)  # a window in which a write, wrongly sent, would reach the table
        assert group.leading and waiting_for_the_events_table(runtime) == 1
        holder.commit()
        released = time.monotonic()
        for thread in threads:
            thread.join(30)
        answered = time.monotonic() - released

    assert all(o.status_code == 201 for o in outcomes.values()), outcomes
    assert outcomes["twin"].body["position"] > outcomes["small"].body["position"]
    # No deadlock was waited out (PostgreSQL checks after a second).
    assert answered < 0.9
