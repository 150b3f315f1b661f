"""Tenant names are unique, even when creators race: exactly one wins a name."""

from __future__ import annotations

import threading
import uuid

import pytest

from palimpsest.domain.errors import ConflictError
from palimpsest.projections.commands.tokens import (
    IssuedToken,
    create_tenant,
    find_tenant,
    list_tenants,
)
from palimpsest.projections.runtime import Runtime


@pytest.mark.parametrize("trial", range(5))
def test_concurrent_creators_of_one_name_make_exactly_one_tenant(
    runtime: Runtime, trial: int
) -> None:
    name = f"race-{trial}-{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(4)
    made: list[IssuedToken] = []
    refused: list[ConflictError] = []

    def create() -> None:
        start.wait()
        try:
            made.append(create_tenant(runtime.log, name))
        except ConflictError as e:
            refused.append(e)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(made) == 1 and len(refused) == 3
    assert [e.tenant_id for e in list_tenants(runtime.log) if e.name == name] == [made[0].tenant_id]
    assert find_tenant(runtime.log, name) == made[0].tenant_id
