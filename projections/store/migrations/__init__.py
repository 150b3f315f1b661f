"""Schema migrations: Alembic revisions, applied by the owner role before anything connects.

``versions/`` holds the revisions (``0001``…), ``env.py`` is Alembic's
environment script, and :mod:`.runner` runs them for a deployment's schema.
"""

from __future__ import annotations

from palimpsest.projections.store.migrations.runner import alembic_config, migrate, schema_version

__all__ = ["alembic_config", "migrate", "schema_version"]
