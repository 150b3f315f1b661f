"""Alembic's environment script: hands over to :func:`.environment.run_environment`."""

from __future__ import annotations

from alembic import context

from palimpsest.projections.store.migrations.environment import run_environment

__all__: list[str] = []

# Alembic sets ``context.config`` only while it runs this file; importing the
# module (the architecture test imports every module) does nothing.
if hasattr(context, "config"):
    run_environment()
