"""Recall by words knows which words are common: lexeme counts by tenant.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    for_each_tenant,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``lexeme_counts``, how many memories hold each lexeme of
    ``memory_lexemes`` by tenant (the empty lexeme: how many hold any), and fill it
    from ``memory_lexemes``, tenant by tenant.

    Why: a text search matched every memory holding any of the query's words, and
    at 100,000 memories a word most of them hold made most of its cost (its rows
    grouped with the rest) while ranking nothing. With the counts, a search leaves
    such a word out of the matching (it still ranks by it), without counting rows.
    """
    schema = target().schema
    op.create_table(
        "lexeme_counts",
        tenant_column(),
        sa.Column("lexeme", sa.Text, nullable=False),
        sa.Column("memories", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "lexeme", name="lexeme_counts_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.lexeme_counts TO {app}")
    isolate_tenants("lexeme_counts")
    allow_tenant_updates("lexeme_counts")
    for_each_tenant(
        "INSERT INTO {schema}.lexeme_counts (tenant_id, lexeme, memories)"
        " SELECT tenant_id, lexeme, count(*) FROM {schema}.memory_lexemes"
        " WHERE tenant_id = {schema}.current_tenant() GROUP BY tenant_id, lexeme"
        " UNION ALL SELECT tenant_id, '', count(DISTINCT memory_id)"
        " FROM {schema}.memory_lexemes WHERE tenant_id = {schema}.current_tenant()"
        " GROUP BY tenant_id"
    )
