"""Tenant names a person cannot tell apart never name two tenants: ``tenant create``
refuses them and writes nothing, and ``tenant list`` reports the collisions a store
recorded before."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from palimpsest.api.cli import EXIT_OK, main
from palimpsest.domain.tenant import Tenant as TenantAggregate
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.eventlog import WriteContext
from tests.api.cli.test_cli import cli_env
from tests.conftest import RunDatabase

__all__ = ["cli_env"]  # the CLI tests' fixture, shared


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "spelling",
    [
        str.upper,
        lambda name: f" {name} ",
        lambda name: name.replace("e", "\u0435", 1),  # a Cyrillic e
        lambda name: name.replace("f", "f\u200b", 1),  # a zero-width space
        lambda name: f"\u202e{name}",  # right-to-left override
        lambda name: f"\u2067{name}\u2069",  # a right-to-left isolate
        lambda name: "\uff44\uff45\uff46\uff41\uff55\uff4c\uff54" + name[7:],  # fullwidth
    ],
    ids=["upper", "spaces", "cyrillic", "zero-width", "rtl-override", "rtl-isolate", "fullwidth"],
)
def test_a_name_that_reads_as_a_taken_one_is_refused_and_nothing_is_written(
    cli_env: None,
    snapshot: Any,
    capsys: pytest.CaptureFixture[str],
    spelling: Callable[[str], str],
) -> None:
    name = f"default-{uuid.uuid4().hex[:8]}"
    assert _run(capsys, "tenant", "create", name)[0] == EXIT_OK
    before = snapshot()
    code, out, err = _run(capsys, "tenant", "create", spelling(name))
    assert code != EXIT_OK and out == ""
    assert err.startswith("palimpsest: error:") and err.count("\n") == 1
    assert snapshot() == before


def test_tenant_list_reports_names_a_store_holds_twice(
    cli_env: None, runtime: Runtime, test_database: RunDatabase, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two tenants recorded by a release that compared names exactly
    name = f"Acme-{uuid.uuid4().hex[:8]}"
    ids = []
    for spelling in (name, name.upper()):
        tenant = TenantAggregate.create(uuid.uuid4(), spelling, "admin")
        runtime.log.record([tenant], WriteContext(tenant_id=tenant.id))
        ids.append(str(tenant.id))
    # When the operator lists the tenants
    code, out, _ = _run(capsys, "tenant", "list")
    # Then each names the other
    assert code == EXIT_OK
    lines = {line["tenant_id"]: line for line in map(json.loads, out.splitlines())}
    assert lines[ids[0]]["name_collides_with"] == [ids[1]]
    assert lines[ids[1]]["name_collides_with"] == [ids[0]]
