"""The review page's sign-ins, in the database: every process of a deployment sees them.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0024"
down_revision: str | None = "0023"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``review_sessions``: one row per signed-in browser, by the SHA-256 digest
    of its cookie's secret (``session_digest``), with the token it signed in with sealed
    under that secret (``sealed_token``: the row alone opens nothing), and when it
    started and was last used. Sessions held in a process's memory ended
    whenever a request reached another process of ``serve --workers N``.
    """
    schema = target().schema
    op.create_table(
        "review_sessions",
        tenant_column(),
        sa.Column("session_digest", sa.LargeBinary, nullable=False),
        sa.Column("sealed_token", sa.LargeBinary, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "session_digest", name="review_sessions_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.review_sessions TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.review_sessions FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    isolate_tenants("review_sessions")
    allow_tenant_updates("review_sessions")
