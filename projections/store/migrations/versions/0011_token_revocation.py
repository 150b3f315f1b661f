"""Token revocation: the runtime role may delete its own tenant's token rows.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from palimpsest.projections.store.migrations._ddl import run

__all__ = ["upgrade"]

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Let a ``TokenRevoked`` write delete the token's lookup row (the event stays in
    the log), only within the transaction's tenant."""
    run("GRANT DELETE ON {schema}.tokens TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.tokens FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
