"""Recall's memory times: ``memory_texts.memory_time``.

Revision ID: 0027
Revises: 0026
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import for_each_tenant, run, target

__all__ = ["upgrade"]

revision = "0027"
down_revision: str | None = "0026"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Give each indexed memory its time (``domain/memory_time.py``: the latest capture
    its current version's support cites, else when that version was recorded), so
    that hybrid recall can favour the memories of the month a query names.

    Derived, like the words beside it: the indexing drain writes it whenever it
    handles a memory (a reaffirm citing a newer capture moves it). A store's existing
    memories are made due for indexing once, so the drain dates them in the
    background; their vectors and words are current already (only ``indexed`` moves
    back), and recall answers meanwhile, without the time for the undated ones.
    """
    schema = target().schema
    op.add_column(
        "memory_texts", sa.Column("memory_time", sa.DateTime(timezone=True)), schema=schema
    )
    for_each_tenant(
        "UPDATE {schema}.revisions r SET indexed = 0 FROM {schema}.memory_texts t"
        " WHERE r.tenant_id = {schema}.current_tenant() AND t.tenant_id = r.tenant_id"
        " AND t.memory_id = r.memory_id AND r.indexed > 0"
    )
    run(
        "INSERT INTO {schema}.index_tenants (tenant_id, marked)"
        " SELECT tenant_id, 1 FROM {schema}.revision_tenants"
        " ON CONFLICT (tenant_id) DO UPDATE SET marked = index_tenants.marked + 1"
    )
