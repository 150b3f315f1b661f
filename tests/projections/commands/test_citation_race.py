"""Citing an observation while another request retracts or erases it.

A write checks an observation's state on a copy it loaded; a retraction or
erasure finds the memories citing the observation before it commits. Run
both at once, many times, with real threads released by a barrier: whatever
the interleaving, no active contribution may cite an observation that is
retracted or erased once both have committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any
from uuid import UUID

import pytest

from palimpsest.domain.errors import ConflictError, InvalidInputError
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import (
    EraseSpec,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    RetractSpec,
    VersionSpec,
    WriteSpec,
)
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.conftest import library_writer

TRIALS = 40


def _citing(runtime: Runtime, caller: Caller, observation_id: UUID) -> list[UUID]:
    with tenant_transaction(runtime.log.datastore, caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT memory_id FROM {schema}.evidence_links WHERE observation_id = %s",
                runtime.log.datastore.schema,
            ),
            (observation_id,),
        )
        return [row["memory_id"] for row in cur]


def _race(*actions: Callable[[], Any]) -> list[BaseException]:
    """Run ``actions`` at once on real threads; return what they raised."""
    barrier = threading.Barrier(len(actions))
    raised: list[BaseException] = []

    def run(action: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            action()
        except (ConflictError, InvalidInputError) as e:
            print("REFUSED", type(e).__name__, e, flush=True)  # refused
        except BaseException as e:
            raised.append(e)

    threads = [threading.Thread(target=run, args=(a,)) for a in actions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return raised


@pytest.mark.slow
@pytest.mark.parametrize("removal", ["retract", "erase"])
@pytest.mark.parametrize("citation", ["new memory", "new version"])
def test_no_citation_survives_a_concurrent_retraction_or_erasure(
    runtime: Runtime, removal: str, citation: str
) -> None:
    caller = authenticate(
        runtime.log, create_tenant(runtime.log, f"race-{removal}-{citation}").token
    )
    writer = library_writer(runtime)

    def write(spec: WriteSpec) -> dict[str, Any]:
        return writer.write(caller, [spec], batch=False).body

    survivors: list[tuple[int, UUID]] = []
    for trial in range(TRIALS):
        observation = UUID(
            write(ObservationSpec("the user prefers tea", "text/plain", None, None, False))["id"]
        )
        cited = (EvidenceSpec(observation, 0, 8),)
        # One memory already cites it, so the removal has work to do.
        first = UUID(write(MemorySpec("fact", "user", None, None, "tea", cited, None, 1.0))["id"])
        other = UUID(write(MemorySpec("fact", "user", None, None, "coffee", (), None, 1.0))["id"])
        cite: WriteSpec = (
            MemorySpec("fact", "user", None, None, "tea again", cited, None, 1.0)
            if citation == "new memory"
            else VersionSpec(other, "tea after all", cited, None, 1.0)
        )
        remove: WriteSpec = (
            RetractSpec(observation, "wrong transcript")
            if removal == "retract"
            else EraseSpec((observation,), (), "asked to forget")
        )
        raised = _race(partial(write, cite), partial(write, remove))
        assert raised == [], raised

        memories = _citing(runtime, caller, observation)
        assert first in memories
        loaded = aggregates_of(runtime.log, caller.tenant_id, [observation, *memories])
        gone = loaded[observation]
        assert isinstance(gone, Observation)
        assert (gone.retracted_by if removal == "retract" else gone.erased_by) is not None
        for memory_id in memories:
            memory = loaded[memory_id]
            assert isinstance(memory, Memory)
            if removal == "erase" and memory.erased_by is not None:
                continue
            active = [
                c for c in memory.contributions if c.active and c.observation_id == observation
            ]
            if active:
                survivors.append((trial, memory_id))
    assert survivors == [], f"{len(survivors)} of {TRIALS} trials kept a citation"
