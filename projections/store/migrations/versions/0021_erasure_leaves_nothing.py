"""Erasure leaves nothing: word counts go with their last word, and proposals name
the memories they were drawn from.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

from palimpsest.projections.store.migrations._ddl import for_each_tenant, run, target

__all__ = ["upgrade"]

revision = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Let the runtime role delete ``lexeme_counts`` rows (its own tenant's), and delete
    the counts of zero a store already holds; give ``retention_proposals`` the
    ``source_ids`` of each proposal (the memories it saw), filled from the log.

    Why: a count's key is its word, and a count left at zero after the last memory
    holding the word was erased kept an erased word in the database. And an erasure
    must find every merge proposal drawn from a memory it erases, to delete its text:
    the read model named only a proposal's centre.
    """
    schema = target().schema
    run("GRANT DELETE ON {schema}.lexeme_counts TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.lexeme_counts FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    for_each_tenant(
        "DELETE FROM {schema}.lexeme_counts"
        " WHERE tenant_id = {schema}.current_tenant() AND memories = 0"
    )
    # Every row holds its proposal's memories once filled; empty until then.
    op.add_column(
        "retention_proposals",
        sa.Column("source_ids", ARRAY(sa.Uuid), nullable=False, server_default="{}"),
        schema=schema,
    )
    # ``seen`` is a list of {memory_id, version_id, content_digest} (ids and digests)
    # in each ``RetentionProposed`` event's JSON, the proposal's first. Only that list
    # is read as JSON: another field (a judge's note) may hold text PostgreSQL cannot
    # (U+0000), which even ``json`` refuses once it reads the object's fields. Text
    # inside a string has its quotes escaped, so only the key itself matches.
    for_each_tenant(
        "UPDATE {schema}.retention_proposals p SET source_ids = s.ids"
        " FROM (SELECT e.originator_id, array_agg((x.value ->> 'memory_id')::uuid"
        "  ORDER BY x.ordinality) AS ids FROM {schema}.palimpsest_events e"
        "  CROSS JOIN LATERAL json_array_elements(substring(convert_from(e.state, 'UTF8')"
        "  FROM '\"seen\":\\s*(\\[[^]]*\\])')::json)"
        "  WITH ORDINALITY AS x(value, ordinality)"
        "  WHERE e.tenant_id = {schema}.current_tenant()"
        "  AND e.topic = 'palimpsest:RetentionProposed' AND e.originator_version = 1"
        "  GROUP BY e.originator_id) AS s"
        " WHERE p.tenant_id = {schema}.current_tenant() AND p.proposal_id = s.originator_id"
    )
    op.alter_column("retention_proposals", "source_ids", server_default=None, schema=schema)
    op.create_index(
        "retention_proposals_source_ids_idx",
        "retention_proposals",
        ["source_ids"],
        schema=schema,
        postgresql_using="gin",
    )
