"""Looking up the recorded response of an ``Idempotency-Key``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from palimpsest.domain.errors import IdempotencyKeyReusedError
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore

    from palimpsest.projections.commands.caller import Caller

__all__ = ["find_response"]


def find_response(
    datastore: PostgresDatastore, caller: Caller, key: str, request_digest: str
) -> tuple[int, dict[str, Any]] | None:
    """Return ``(status, body)`` recorded for the caller's ``key``, if any.

    Keys are scoped to the principal: another principal's key never matches.

    Raises:
        IdempotencyKeyReusedError: the key was recorded for a different request.
    """
    with tenant_transaction(datastore, caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT request_digest, status_code, response FROM {schema}.idempotency_keys"
                " WHERE principal_id = %s AND key = %s",
                datastore.schema,
            ),
            (caller.principal_id, key),
        )
        row = cur.fetchone()
    if row is None:
        return None
    if row["request_digest"] != request_digest:
        msg = f"Idempotency-Key {key!r} was already used for a different request"
        raise IdempotencyKeyReusedError(msg)
    return int(row["status_code"]), dict(row["response"])
