"""Snapshots: taken every 100 events of a memory, tenant-scoped, verified, rebuilt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from palimpsest.domain.belief import project_belief
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import (
    CapturePolicy,
    EdgeSpec,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    VersionSpec,
    Writer,
)
from palimpsest.projections.history.rebuild import rebuild
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import SNAPSHOTS_TABLE
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.belief_facts import facts_of, memory_facts
from tests.conftest import Tenant


def _snapshot_versions(runtime: Runtime, memory_id: UUID) -> list[int]:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f'SELECT originator_version FROM "{schema}"."{SNAPSHOTS_TABLE}"'
            " WHERE originator_id = %s ORDER BY originator_version",
            (memory_id,),
        ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.slow
def test_a_long_memory_is_snapshotted_and_as_of_reads_agree_with_the_log(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=1)),
        lambda: datetime.now(UTC),
    )
    caller = authenticate(runtime.log, tenant.admin.token)

    def write(*specs: object) -> dict[str, object]:
        return writer.write(caller, list(specs), batch=len(specs) > 1).body  # type: ignore[arg-type]

    observation = UUID(
        str(write(ObservationSpec("said so", "text/plain", None, None, False))["id"])
    )
    created = write(
        MemorySpec("fact", "user", None, None, "v0", (EvidenceSpec(observation, 0, 4),), "m", 1.0)
    )
    memory = UUID(str(created["id"]))
    other = UUID(str(write(MemorySpec("fact", "user", None, None, "o", (), None, 1.0))["id"]))
    positions = [int(str(created["position"]))]
    for i in range(70):  # each revision with evidence: two events
        body = write(VersionSpec(memory, f"v{i}", (EvidenceSpec(observation, 0, 4),), "m", 1.0))
        positions.append(int(str(body["position"])))
        if i == 40:
            positions.append(int(str(write(EdgeSpec(other, "supersedes", memory))["position"])))
    assert _snapshot_versions(runtime, memory) == [101]

    for position in positions[::7] + positions[-3:]:
        from_snapshot = memory_facts(runtime.log, tenant.id, memory, at_position=position)
        from_events = facts_of(runtime.log, tenant.id, [memory], at_position=position)[memory]
        assert from_snapshot == from_events, position
        assert project_belief(from_snapshot) == project_belief(from_events)

    with tenant_transaction(runtime.log.datastore, other_tenant.id, commit=False) as cur:
        cur.execute(f'SELECT count(*) AS n FROM "{runtime.database.schema}"."{SNAPSHOTS_TABLE}"')
        row = cur.fetchone()
    assert row is not None and row["n"] == 0  # another tenant sees no snapshot

    assert verify(runtime.database, tenant=tenant.id).divergences == []
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(
            f'DELETE FROM "{schema}"."{SNAPSHOTS_TABLE}" WHERE originator_id = %s', (memory,)
        )
    rebuild(runtime.database)
    assert _snapshot_versions(runtime, memory) == [101]  # rebuild writes the same snapshots
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    # A tampered snapshot is a divergence.
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{schema}"."{SNAPSHOTS_TABLE}" SET state = convert_to(replace('
            "convert_from(state, 'UTF8'), '\"pinned\":false', '\"pinned\":true'), 'UTF8')"
            " WHERE originator_id = %s",
            (memory,),
        )
    [divergence] = verify(runtime.database, tenant=tenant.id).divergences
    assert divergence.table == SNAPSHOTS_TABLE and divergence.field == "pinned"
    assert divergence.memory_id == str(memory)
