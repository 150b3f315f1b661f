"""Recall by words scores from its inverted rows: how often each memory holds a lexeme.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import for_each_tenant, run, target

__all__ = ["upgrade"]

revision = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Give each ``memory_lexemes`` row ``occurrences``, the number of positions its
    memory's document holds the lexeme at, filled from ``memory_texts`` tenant by
    tenant, and carry it in the primary key's index (``INCLUDE``).

    Why: a text search read and ranked the documents of its 500 best matches, at
    100,000 memories about 60% of its time. A document's score against an
    any-of-these-words query is a function of which of the words it holds and of
    how many positions hold them (:mod:`palimpsest.projections.recall._words`): with the
    occurrences beside each lexeme, the index-only scan that finds the matches
    scores them too.
    """
    schema = target().schema
    # Every row holds its lexeme at one position or more: 1 is right for most, and
    # the fill below corrects the rest before the default goes.
    op.add_column(
        "memory_lexemes",
        sa.Column("occurrences", sa.SmallInteger, nullable=False, server_default="1"),
        schema=schema,
    )
    for_each_tenant(
        "UPDATE {schema}.memory_lexemes x SET occurrences = w.occurrences"
        " FROM (SELECT t.memory_id, l.lexeme, cardinality(l.positions) AS occurrences"
        " FROM {schema}.memory_texts t, unnest(t.document) AS l"
        " WHERE t.tenant_id = {schema}.current_tenant()) AS w"
        " WHERE x.tenant_id = {schema}.current_tenant() AND x.memory_id = w.memory_id"
        " AND x.lexeme = w.lexeme AND w.occurrences > 1"
    )
    op.alter_column("memory_lexemes", "occurrences", server_default=None, schema=schema)
    run("ALTER TABLE {schema}.memory_lexemes DROP CONSTRAINT memory_lexemes_pkey")
    run(
        "ALTER TABLE {schema}.memory_lexemes ADD CONSTRAINT memory_lexemes_pkey"
        " PRIMARY KEY (tenant_id, lexeme, memory_id) INCLUDE (occurrences)"
    )
