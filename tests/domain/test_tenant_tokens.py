"""The Tenant aggregate's tokens: a revoked token is recorded once, an unknown one refused."""

from __future__ import annotations

from uuid import uuid4

import pytest
from eventsourcing.utils import get_topic

from palimpsest.domain.errors import NotFoundError
from palimpsest.domain.tenant import Tenant


def test_a_token_is_revoked_once_and_an_unknown_one_is_refused() -> None:
    tenant = Tenant.create(uuid4(), "acme", "admin")
    holder = tenant.register_principal("bot", principal_id=tenant.founder_id)
    token_id = uuid4()
    tenant.issue_token(token_id, holder, "reader", "sha256:ab", principal_id=tenant.founder_id)
    tenant.collect_events()

    assert tenant.revoke_token(token_id, principal_id=tenant.founder_id) == "sha256:ab"
    (revoked,) = tenant.collect_events()
    assert isinstance(revoked, Tenant.TokenRevoked)
    assert get_topic(type(revoked)) == "palimpsest:TokenRevoked"
    assert (revoked.token_id, revoked.token_digest) == (token_id, "sha256:ab")

    assert tenant.revoke_token(token_id, principal_id=tenant.founder_id) is None
    assert tenant.collect_events() == []
    with pytest.raises(NotFoundError):
        tenant.revoke_token(uuid4(), principal_id=tenant.founder_id)
