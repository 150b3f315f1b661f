"""Group commit: concurrent writes of one process share one transaction, and a
write that is invalid, or that the database refuses, fails alone."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from domain.errors import IdempotencyKeyReusedError, NotFoundError
from projections.commands.tokens import authenticate
from projections.commands.writer import CapturePolicy, MemorySpec, VersionSpec, Writer
from projections.runtime import Runtime
from projections.store.schema import EVENTS_TABLE
from tests.conftest import Tenant, count_events


def _until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.01)


def _waiting_on_lock(runtime: Runtime) -> bool:
    """Whether a write waits for the events table (held by the test)."""
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
            (f'"{schema}".{EVENTS_TABLE}',),
        ).fetchone()
    return bool(row and row[0])


def _note(content: str) -> MemorySpec:
    return MemorySpec("fact", "user", None, None, content, (), None, 1.0)


def test_a_group_commits_together_and_an_invalid_or_refused_write_fails_alone(
    runtime: Runtime, tenant: Tenant
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=1)),
        lambda: datetime.now(UTC),
    )
    revised = writer.write(caller, [_note("The build takes 4 minutes")], batch=False).body["id"]
    schema, group = runtime.database.schema, runtime.log.group
    group.sizes.clear()
    recorder = runtime.log.recorder
    isolated_before = recorder.isolated_groups  # type: ignore[attr-defined]
    outcomes: dict[str, Any] = {}

    def write(name: str, spec: Any, key: tuple[str, str] | None = None) -> threading.Thread:
        def run() -> None:
            try:
                outcomes[name] = writer.write(caller, [spec], batch=False, idempotency=key)
            except Exception as e:
                outcomes[name] = e

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    # Given the events table held by another transaction, so that a first write
    # waits on it and the next ones queue up behind it for one group.
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')

        threads = [write("first", _note("The first write"))]
        _until(lambda: _waiting_on_lock(runtime), 10, "the first write waits for the table")
        key = f"key-{uuid.uuid4()}"
        threads += [write(f"valid{i}", _note(f"Valid neighbour {i}")) for i in range(4)]
        threads += [
            write("key-a", _note("One body"), (key, "sha256:a")),
            write("key-b", _note("Another body"), (key, "sha256:b")),
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
        _until(lambda: group.queued == 8, 20, f"eight writes queue: {group.queued} {outcomes}")
        # Refused before it could join: answered while nothing can commit (its thread
        # may answer after the others queued, on a busy machine).
        _until(lambda: "invalid" in outcomes, 20, f"the invalid write is refused: {outcomes}")
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
    # Two versions of one memory built from the same version: the database refuses
    # the second (its version number is taken); it is built again and commits.
    versions = [outcomes.pop("version-a"), outcomes.pop("version-b")]
    assert all(not isinstance(o, Exception) and o.status_code == 201 for o in versions), versions
    everything = [*outcomes.values(), *accepted, *versions]
    assert all(not isinstance(o, Exception) and o.status_code == 201 for o in everything)
    positions = [o.body["position"] for o in everything]
    assert len(set(positions)) == len(positions)

    # The eight that queued behind the first write were one transaction: one lock,
    # one commit (the version built again came after it, alone).
    assert list(group.sizes) == [8]
    # Refused as one, the group was inserted again one savepoint per write.
    assert recorder.isolated_groups == isolated_before + 1  # type: ignore[attr-defined]
    with runtime.database.owner_connection(autocommit=True) as conn:
        versions_of_revised = conn.execute(
            f'SELECT max(originator_version) FROM "{schema}".{EVENTS_TABLE}'
            " WHERE originator_id = %s",
            (uuid.UUID(revised),),
        ).fetchone()
        keys = conn.execute(
            f'SELECT count(*) FROM "{schema}".idempotency_keys WHERE key = %s', (key,)
        ).fetchone()
    assert versions_of_revised == (4,)  # created (2 events), then two versions
    assert keys == (1,)
    # Nothing of the refused or the invalid write is in the log.
    assert count_events(runtime, tenant, "MemoryCreated") == 7


def test_a_group_of_several_tenants_commits_as_one_write_each_with_its_own_answer(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=1)),
        lambda: datetime.now(UTC),
    )
    callers = [authenticate(runtime.log, t.admin.token) for t in (tenant, other_tenant)]
    schema, group = runtime.database.schema, runtime.log.group
    recorder = runtime.log.recorder
    isolated_before = recorder.isolated_groups  # type: ignore[attr-defined]
    group.sizes.clear()
    outcomes: dict[str, Any] = {}
    keys = {f"w{i}": (f"key-{uuid.uuid4()}", f"sha256:{i}") for i in range(6) if i % 3}

    def write(name: str, caller: Any) -> threading.Thread:
        def run() -> None:
            spec = _note(f"written by {name}")
            outcomes[name] = writer.write(caller, [spec], batch=False, idempotency=keys.get(name))

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first", callers[0])]
        _until(lambda: _waiting_on_lock(runtime), 10, "the first write waits for the table")
        threads += [write(f"w{i}", callers[i % 2]) for i in range(6)]
        _until(lambda: group.queued == 6, 20, "six writes queue for the next group")
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
        again = writer.write(caller, [_note("anything")], batch=False, idempotency=key)
        assert again.replayed and again.body == outcomes[name].body
