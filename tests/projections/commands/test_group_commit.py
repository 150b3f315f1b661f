"""Group commit: concurrent writes of one process share one transaction, and a
write that is invalid, or that the database refuses, fails alone."""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from palimpsest.domain.errors import IdempotencyKeyReusedError, NotFoundError
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import (
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    RetractSpec,
    VersionSpec,
    Writer,
)
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.conftest import (
    Tenant,
    count_events,
    fact_spec,
    library_writer,
    logged_version,
    wait_until,
    waiting_for_the_events_table,
)


@pytest.fixture(autouse=True)
def _groups_keep_the_lead(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here holds the events table so that the writes behind a first one
    queue for one group: each group keeps the lead until it is answered. Groups sent
    ahead (the default) are ``test_groups_ahead.py``'s."""
    monkeypatch.setattr(runtime.log.group, "ahead", 0)


def _waiting_on_lock(runtime: Runtime) -> bool:
    """Whether a write waits for the events table (held by the test)."""
    return waiting_for_the_events_table(runtime) > 0


def _started(outcomes: dict[str, Any], name: str, call: Callable[[], Any]) -> threading.Thread:
    """Run ``call`` on a thread of its own: its outcome, or what it raised, goes in
    ``outcomes[name]``."""

    def run() -> None:
        try:
            outcomes[name] = call()
        except Exception as e:
            outcomes[name] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _writing(runtime: Runtime, tenant: Tenant, content: str) -> tuple[Caller, Writer, str]:
    """The tenant admin's caller and a library writer, the id of a fact it wrote (to
    revise), and no group sizes counted yet."""
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    written = writer.write(caller, [fact_spec(content)], batch=False).body["id"]
    runtime.log.group.sizes.clear()
    return caller, writer, str(written)


def test_a_group_commits_together_and_an_invalid_or_refused_write_fails_alone(
    runtime: Runtime, tenant: Tenant
) -> None:
    caller, writer, revised = _writing(runtime, tenant, "The build takes 4 minutes")
    schema, group = runtime.database.schema, runtime.log.group
    recorder = runtime.log.recorder
    isolated_before = recorder.isolated_groups  # type: ignore[attr-defined]
    outcomes: dict[str, Any] = {}

    def write(name: str, spec: Any, key: tuple[str, str] | None = None) -> threading.Thread:
        return _started(
            outcomes, name, lambda: writer.write(caller, [spec], batch=False, idempotency=key)
        )

    # Given the events table held by another transaction, so that a first write
    # waits on it and the next ones queue up behind it for one group.
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')

        threads = [write("first", fact_spec("The first write"))]
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the first write waits for the table")
        key = f"key-{uuid.uuid4()}"
        threads += [write(f"valid{i}", fact_spec(f"Valid neighbour {i}")) for i in range(4)]
        threads += [
            write("key-a", fact_spec("One body"), (key, "sha256:a")),
            write("key-b", fact_spec("Another body"), (key, "sha256:b")),
            write(
                "version-a",
                VersionSpec(uuid.UUID(revised), "The build takes 5 minutes", (), None, 1.0),
            ),
            write(
                "version-b",
                VersionSpec(uuid.UUID(revised), "The build takes 6 minutes", (), None, 1.0),
            ),
            write("invalid", VersionSpec(uuid.uuid4(), "No such memory", (), None, 1.0)),
        ]
        wait_until(lambda: group.queued == 8, 20, f"eight writes queue: {group.queued} {outcomes}")
        # Refused before it could join: answered while nothing can commit (its thread
        # may answer after the others queued, on a busy machine).
        wait_until(lambda: "invalid" in outcomes, 20, f"the invalid write is refused: {outcomes}")
        assert group.queued == 8
        holder.commit()
    for thread in threads:
        thread.join(30)

    # The invalid write failed with its own problem, and wrote nothing.
    assert isinstance(outcomes.pop("invalid"), NotFoundError)
    # One of two requests using one Idempotency-Key at once is refused by the
    # database's unique key, inside the group: it alone learns the key is taken.
    key_outcomes = [outcomes.pop("key-a"), outcomes.pop("key-b")]
    refused = [o for o in key_outcomes if isinstance(o, IdempotencyKeyReusedError)]
    accepted = [o for o in key_outcomes if not isinstance(o, Exception)]
    assert len(refused) == 1 and len(accepted) == 1, key_outcomes
    # Two versions of one memory built from the same version: the group refuses the
    # second before its transaction (its version number is taken by the first); it
    # is built again and commits.
    versions = [outcomes.pop("version-a"), outcomes.pop("version-b")]
    assert all(not isinstance(o, Exception) and o.status_code == 201 for o in versions), versions
    everything = [*outcomes.values(), *accepted, *versions]
    assert all(not isinstance(o, Exception) and o.status_code == 201 for o in everything)
    positions = [o.body["position"] for o in everything]
    assert len(set(positions)) == len(positions)

    # Seven of the eight that queued behind the first write were one transaction:
    # one lock, one commit (the version built again came after it, alone).
    assert list(group.sizes) == [7]
    # Refused as one, the group was inserted again one savepoint per write.
    assert recorder.isolated_groups == isolated_before + 1  # type: ignore[attr-defined]
    with runtime.database.owner_connection(autocommit=True) as conn:
        keys = conn.execute(
            f'SELECT count(*) FROM "{schema}".idempotency_keys WHERE key = %s', (key,)
        ).fetchone()
    assert logged_version(runtime, uuid.UUID(revised)) == 4  # created (2 events), 2 versions
    assert keys == (1,)
    # Nothing of the refused or the invalid write is in the log.
    assert count_events(runtime, tenant, "MemoryCreated") == 7


def test_a_group_of_several_tenants_commits_as_one_write_each_with_its_own_answer(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    writer = library_writer(runtime)
    callers = [authenticate(runtime.log, t.admin.token) for t in (tenant, other_tenant)]
    schema, group = runtime.database.schema, runtime.log.group
    recorder = runtime.log.recorder
    isolated_before = recorder.isolated_groups  # type: ignore[attr-defined]
    group.sizes.clear()
    outcomes: dict[str, Any] = {}
    keys = {f"w{i}": (f"key-{uuid.uuid4()}", f"sha256:{i}") for i in range(6) if i % 3}

    def write(name: str, caller: Any) -> threading.Thread:
        spec, key = fact_spec(f"written by {name}"), keys.get(name)
        return _started(
            outcomes, name, lambda: writer.write(caller, [spec], batch=False, idempotency=key)
        )

    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first", callers[0])]
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the first write waits for the table")
        threads += [write(f"w{i}", callers[i % 2]) for i in range(6)]
        wait_until(lambda: group.queued == 6, 20, "six writes queue for the next group")
        holder.commit()
    for thread in threads:
        thread.join(30)

    assert list(group.sizes) == [6]
    assert recorder.isolated_groups == isolated_before  # type: ignore[attr-defined]
    # Each write is answered with the position of its own last event ...
    with runtime.database.owner_connection(autocommit=True) as conn:
        for name, outcome in outcomes.items():
            assert outcome.status_code == 201 and not outcome.replayed
            row = conn.execute(
                f'SELECT max(notification_id) FROM "{schema}".{EVENTS_TABLE}'
                " WHERE originator_id = %s",
                (uuid.UUID(outcome.body["id"]),),
            ).fetchone()
            assert row == (outcome.body["position"],), name
    # ... and a write with an Idempotency-Key replays its own response.
    for name, key in keys.items():
        caller = callers[int(name[1:]) % 2]
        again = writer.write(caller, [fact_spec("anything")], batch=False, idempotency=key)
        assert again.replayed and again.body == outcomes[name].body


@pytest.mark.parametrize("first_queued", ["citation", "retraction"])
def test_a_citation_and_the_retraction_of_its_observation_never_commit_as_one_group(
    runtime: Runtime, tenant: Tenant, first_queued: str
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    observation = uuid.UUID(
        writer.write(
            caller,
            [ObservationSpec("the user prefers tea", "text/plain", None, None, False)],
            batch=False,
        ).body["id"]
    )
    cited = (EvidenceSpec(observation, 0, 8),)
    writer.write(
        caller, [MemorySpec("fact", "user", None, None, "tea", cited, None, 1.0)], batch=False
    )
    specs: dict[str, Any] = {
        "citation": MemorySpec("fact", "user", None, None, "tea again", cited, None, 1.0),
        "retraction": RetractSpec(observation, "wrong transcript"),
    }
    schema, group = runtime.database.schema, runtime.log.group
    recorder = runtime.log.recorder
    isolated_before = recorder.isolated_groups  # type: ignore[attr-defined]
    outcomes: dict[str, Any] = {}

    def write(name: str, spec: Any) -> threading.Thread:
        return _started(outcomes, name, lambda: writer.write(caller, [spec], batch=False))

    # Given both queued, in a chosen order, behind a write that waits for the events
    # table: they are one group, built from the same state of the observation.
    second_queued = "retraction" if first_queued == "citation" else "citation"
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first", fact_spec("The first write"))]
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the first write waits for the table")
        threads.append(write(first_queued, specs[first_queued]))
        wait_until(lambda: group.queued == 1, 20, f"the {first_queued} queues")
        threads.append(write(second_queued, specs[second_queued]))
        wait_until(lambda: group.queued == 2, 20, f"the {second_queued} queues after it")
        holder.commit()
    for thread in threads:
        thread.join(30)

    # The retraction committed, and no memory's support still counts the observation:
    # the later of the two was built again after the earlier committed (a citation
    # then refused: the observation is retracted).
    retracted = outcomes["retraction"]
    assert not isinstance(retracted, Exception) and retracted.status_code == 201, outcomes
    with tenant_transaction(runtime.log.datastore, caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT memory_id FROM {schema}.evidence_links WHERE observation_id = %s",
                schema,
            ),
            (observation,),
        )
        citing = [row["memory_id"] for row in cur]
    loaded = aggregates_of(runtime.log, caller.tenant_id, citing)
    active = [
        memory_id
        for memory_id, memory in loaded.items()
        for c in memory.contributions
        if c.active and c.observation_id == observation
    ]
    assert active == [], outcomes
    # The later one was refused before the group's transaction, not by the database:
    # the group was never inserted again one savepoint per write.
    assert recorder.isolated_groups == isolated_before  # type: ignore[attr-defined]


@pytest.mark.parametrize("neighbour", [True, False])
def test_a_write_built_on_a_version_this_process_committed_since_is_refused_before_its_group(
    runtime: Runtime, tenant: Tenant, neighbour: bool
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    revised = uuid.UUID(
        writer.write(caller, [fact_spec("The build takes 4 minutes")], batch=False).body["id"]
    )
    schema, group = runtime.database.schema, runtime.log.group
    recorder = runtime.log.recorder
    isolated_before = recorder.isolated_groups  # type: ignore[attr-defined]
    group.sizes.clear()
    outcomes: dict[str, Any] = {}

    def write(name: str, spec: Any) -> threading.Thread:
        return _started(outcomes, name, lambda: writer.write(caller, [spec], batch=False))

    # Given a version that commits alone once the table is free, and, queued behind
    # it, another version of the same memory built before it committed (beside a
    # write of another memory, or alone).
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first", VersionSpec(revised, "5 minutes", (), None, 1.0))]
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the first version waits for the table")
        threads.append(write("stale", VersionSpec(revised, "6 minutes", (), None, 1.0)))
        if neighbour:
            threads.append(write("neighbour", fact_spec("Another memory")))
        queued = 2 if neighbour else 1
        wait_until(lambda: group.queued == queued, 20, "the writes queue for the next group")
        holder.commit()
    for thread in threads:
        thread.join(30)

    # Every write committed: the stale version was built again, after the first.
    assert all(o.status_code == 201 for o in outcomes.values()), outcomes
    assert outcomes["stale"].body["position"] > outcomes["first"].body["position"]
    # It was refused before its group's transaction (this process had committed the
    # version it took), not by the database: its neighbour's group was never
    # inserted again one savepoint per write, and a group left empty ran none.
    assert recorder.isolated_groups == isolated_before  # type: ignore[attr-defined]
    assert list(group.sizes) == []


@pytest.mark.parametrize(
    "ahead", [0, 1], ids=["queued-behind-a-group", "waiting-to-lead-behind-one-sent-ahead"]
)
def test_a_write_interrupted_while_it_waits_is_not_written_and_strands_no_one(
    runtime: Runtime, tenant: Tenant, ahead: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in a command-line import that waits for its group (or, behind a group
    sent ahead, to lead the next): the caller is told it was interrupted, its write
    is not committed behind its back, and the writes queued after it still commit
    (the next group's lead is not lost with it)."""
    monkeypatch.setattr(runtime.log.group, "ahead", ahead)
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    schema, group = runtime.database.schema, runtime.log.group
    created_before = count_events(runtime, tenant, "MemoryCreated")
    outcomes: dict[str, Any] = {}

    def write(name: str) -> threading.Thread:
        spec = fact_spec(f"written by {name}")
        return _started(outcomes, name, lambda: writer.write(caller, [spec], batch=False))

    main = threading.main_thread().ident
    assert main == threading.get_ident()
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first")]
        # Its group led (or sent ahead) and waiting for the table: a waiter the test
        # does not know of would let the interrupted write lead instead.
        wait_until(
            lambda: (group.leading or group.unanswered == 1) and _waiting_on_lock(runtime),
            10,
            "the first write's group waits for the table",
        )

        def interrupt_when_queued() -> None:
            try:
                wait_until(
                    lambda: group.leading and group.queued == 1, 20, "the interrupted write waits"
                )
                threads.append(write("after"))
                wait_until(lambda: group.queued == 2, 20, "a write queues after it")
            finally:  # whatever happened, the main thread is not left waiting
                assert main is not None
                signal.pthread_kill(main, signal.SIGINT)

        interrupter = threading.Thread(target=interrupt_when_queued)
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            writer.write(caller, [fact_spec("written by the interrupted")], batch=False)
        interrupter.join(30)
        wait_until(lambda: group.leading and group.queued == 1, 10, "the next write waits to lead")
        holder.commit()
    for thread in threads:
        thread.join(30)

    assert outcomes["first"].status_code == 201
    assert outcomes["after"].status_code == 201
    assert count_events(runtime, tenant, "MemoryCreated") == created_before + 2
    # The lead passes on as before: nothing is left leading, the next write commits at once.
    assert not group.leading
    assert writer.write(caller, [fact_spec("written next")], batch=False).status_code == 201


def _holding_the_table_while_blocked(runtime: Runtime, blocker_pid: int) -> bool:
    """Whether a write's backend holds the events table's lock while it waits on a row
    lock held by ``blocker_pid``."""
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks l WHERE l.granted AND l.mode = 'ExclusiveLock'"
            " AND l.relation = %s::regclass AND %s = ANY(pg_blocking_pids(l.pid))",
            (f'"{schema}".{EVENTS_TABLE}', blocker_pid),
        ).fetchone()
    return bool(row and row[0])


def test_a_group_holds_the_events_table_lock_for_its_whole_transaction(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Positions must follow commit order across processes: a group takes the events
    # table's lock, as a write alone does, before it records any event.
    caller, writer, revised = _writing(runtime, tenant, "The deploy takes 9 minutes")
    schema, group = runtime.database.schema, runtime.log.group
    outcomes: dict[str, Any] = {}

    def write(name: str, spec: Any) -> threading.Thread:
        return _started(outcomes, name, lambda: writer.write(caller, [spec], batch=False))

    with (
        runtime.database.owner_connection() as table_holder,
        runtime.database.owner_connection() as row_holder,
    ):
        # Given a first write waiting for the table, and two more queued behind it
        # for one group, one of them revising a memory whose revision row is held.
        table_holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first", fact_spec("The first write"))]
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the first write waits for the table")
        threads += [
            write("revision", VersionSpec(uuid.UUID(revised), "It takes 8", (), None, 1.0)),
            write("new", fact_spec("A new fact")),
        ]
        wait_until(lambda: group.queued == 2, 20, f"two writes queue: {group.queued} {outcomes}")
        row_holder.execute(
            f'SELECT 1 FROM "{schema}".revisions WHERE memory_id = %s FOR UPDATE', (revised,)
        )
        blocker = row_holder.execute("SELECT pg_backend_pid()").fetchone()
        assert blocker is not None
        table_holder.commit()
        # When the group's transaction stops at the held row, it holds the table.
        wait_until(
            lambda: _holding_the_table_while_blocked(runtime, blocker[0]),
            20,
            f"the group holds the table while it waits: {outcomes}",
        )
        row_holder.rollback()
    for thread in threads:
        thread.join(30)
    assert all(o.status_code == 201 for o in outcomes.values()), outcomes
    assert list(group.sizes) == [2]


def _lock_holder_rows(runtime: Runtime, table: str) -> int:
    """How many backends waiting for the events table hold a lock on ``table``."""
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks waiting JOIN pg_locks held USING (pid)"
            " WHERE NOT waiting.granted AND waiting.relation = %s::regclass"
            " AND held.granted AND held.relation = %s::regclass",
            (f'"{schema}".{EVENTS_TABLE}', f'"{schema}".{table}'),
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize(("size", "before_the_lock"), [(200, False), (20_000, True)])
def test_large_content_is_stored_before_the_events_table_lock(
    runtime: Runtime, tenant: Tenant, size: int, before_the_lock: bool
) -> None:
    # Small content rides with the write's marks under the lock (one statement
    # fewer); large content is sent and compressed before it, while no other
    # writer waits.
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    content = f"{uuid.uuid4()} " + "x" * size
    outcomes: dict[str, Any] = {}
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{runtime.database.schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        thread = _started(
            outcomes, "write", lambda: writer.write(caller, [fact_spec(content)], batch=False)
        )
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the write waits for the table")
        assert bool(_lock_holder_rows(runtime, "payloads")) == before_the_lock
        holder.commit()
    thread.join(30)
    assert outcomes["write"].status_code == 201
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT count(*) AS n FROM {schema}.payloads WHERE size_bytes = %s",
                runtime.database.schema,
            ),
            (len(content.encode()),),
        )
        assert cur.fetchone() == {"n": 1}
