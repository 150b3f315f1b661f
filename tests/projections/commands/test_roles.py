"""The command layer refuses a caller whose role does not grant a spec's role,
before it reads or writes anything, whoever calls it (not only the HTTP API)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest

from palimpsest.domain.errors import PermissionDeniedError
from palimpsest.domain.role import ROLES
from palimpsest.projections.commands._settlement import SettleSpec
from palimpsest.projections.commands._spec import WriteSpec
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.consolidation import MergeSpec, ProposeMergeSpec, ReflectSpec
from palimpsest.projections.commands.contributions import ContributionSpec
from palimpsest.projections.commands.cycle import CycleConsolidatedSpec, CycleSpec
from palimpsest.projections.commands.forgetting_policy import ForgettingPolicySpec
from palimpsest.projections.commands.judgment import JudgmentSpec
from palimpsest.projections.commands.memory import EdgeRetractSpec
from palimpsest.projections.commands.proposals import ProposalDecisionSpec, ProposeSpec
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import (
    EdgeSpec,
    EraseSpec,
    EvidenceSpec,
    LabelSpec,
    MemorySpec,
    ObservationSpec,
    RetentionSpec,
    RetractSpec,
    TenantDeletionSpec,
    VersionSpec,
    WithdrawSpec,
)
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant, library_writer

_SOME_ID = UUID("00000000-0000-4000-8000-000000000001")

# One example of every spec; the ids need not exist: the role is checked first.
EXAMPLES: list[WriteSpec] = [
    ObservationSpec("said so", "text/plain", None, None, False),
    MemorySpec("fact", "user", None, None, "it is so", (), None, 1.0),
    VersionSpec(_SOME_ID, "it is more so", (EvidenceSpec(_SOME_ID, 0, 4),), None, 1.0),
    EdgeSpec(_SOME_ID, "extends", _SOME_ID),
    EdgeRetractSpec(_SOME_ID, _SOME_ID, None),
    SettleSpec(_SOME_ID, _SOME_ID, "both_stand", "both hold"),
    ContributionSpec(_SOME_ID, None, (EvidenceSpec(_SOME_ID, 0, 4),), None, 1.0),
    RetractSpec(_SOME_ID, None),
    WithdrawSpec(None, "judge-1.4", None),
    LabelSpec(_SOME_ID, "pin", None),
    RetentionSpec(24, None),
    EraseSpec((_SOME_ID,), (), "asked to"),
    TenantDeletionSpec("asked to"),
    ProposeSpec(_SOME_ID, "archive", None, 0.9, None, "judge", _SOME_ID, dismissed=False),
    ProposalDecisionSpec(_SOME_ID, "reject", "no"),
    JudgmentSpec(enabled=True, daily_calls=1, daily_tokens=1),
    ProposeMergeSpec(((_SOME_ID, _SOME_ID),), "merged", "extractive", _SOME_ID),
    MergeSpec(((_SOME_ID, _SOME_ID),), "merged", None),
    ReflectSpec(((_SOME_ID, _SOME_ID),), "an insight", "model", _SOME_ID),
    ForgettingPolicySpec({"enabled": True}),
    CycleSpec(_SOME_ID, datetime(2026, 1, 1, tzinfo=UTC), 0, {}, {}, [], (), (), ()),
    CycleConsolidatedSpec(_SOME_ID, {}),
]

BELOW: dict[str, tuple[str, ...]] = {
    "reader": (),
    "writer": ("reader",),
    "admin": ("reader", "writer"),
}
"""The roles that do not grant each role."""


def _all_specs(cls: type[WriteSpec] = WriteSpec) -> set[type[WriteSpec]]:
    found: set[type[WriteSpec]] = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_all_specs(sub)}
    return found


def test_the_examples_cover_every_spec() -> None:
    assert {type(spec) for spec in EXAMPLES} == _all_specs()


def test_admin_only_specs_are_erasure_retention_tenant_deletion_and_policies() -> None:
    admin_only = {type(spec) for spec in EXAMPLES if spec.role == "admin"}
    assert admin_only == {
        EraseSpec,
        RetentionSpec,
        TenantDeletionSpec,
        JudgmentSpec,
        ForgettingPolicySpec,
    }
    assert {spec.role for spec in EXAMPLES} <= set(ROLES)


def test_a_spec_that_names_no_role_cannot_be_defined() -> None:
    with pytest.raises(TypeError):

        class _Nameless(WriteSpec):
            action = "do something"

            def apply(self, batch: Any) -> Any:
                raise NotImplementedError


@pytest.mark.parametrize(
    ("spec", "role"),
    [(spec, role) for spec in EXAMPLES for role in BELOW[spec.role]],
    ids=lambda value: type(value).__name__ if isinstance(value, WriteSpec) else str(value),
)
def test_a_caller_below_the_specs_role_is_refused_and_nothing_is_written(
    runtime: Runtime, tenant: Tenant, snapshot: Any, spec: WriteSpec, role: str
) -> None:
    # Given a token of the tenant with a role that does not grant the spec's
    caller = authenticate(runtime.log, tenant.token(role))
    before = snapshot()
    # When the command layer is called directly, with an idempotency key too
    with pytest.raises(PermissionDeniedError):
        library_writer(runtime).write(caller, [spec], batch=False, idempotency=("k-1", "sha256:x"))
    # Then nothing was recorded: no event, no row
    assert snapshot() == before


def test_one_refused_spec_refuses_the_whole_batch(
    runtime: Runtime, tenant: Tenant, snapshot: Any
) -> None:
    caller = authenticate(runtime.log, tenant.token("writer"))
    before = snapshot()
    with pytest.raises(PermissionDeniedError):
        library_writer(runtime).write(caller, [EXAMPLES[0], RetentionSpec(24, None)], batch=True)
    assert snapshot() == before


def test_a_caller_with_the_role_gets_past_the_check(runtime: Runtime, tenant: Tenant) -> None:
    writer = authenticate(runtime.log, tenant.token("writer"))
    captured = library_writer(runtime).write(writer, [EXAMPLES[0]], batch=False)
    assert captured.status_code == 201
    admin = authenticate(runtime.log, tenant.admin.token)
    retention = library_writer(runtime).write(admin, [RetentionSpec(24, None)], batch=False)
    assert retention.body["raw_hours"] == 24


def test_an_unknown_role_grants_nothing() -> None:
    caller = Caller(uuid4(), uuid4(), "someone", "owner")
    assert not any(caller.may(role) for role in ROLES)
