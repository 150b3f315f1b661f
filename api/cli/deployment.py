"""Preparing a deployment: ``palimpsest config`` shows the settings, ``migrate`` the schema."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from palimpsest.api.cli.exit_code import EXIT_OK
from palimpsest.projections.drains.settings import DrainSettings
from palimpsest.projections.recall.settings import EmbeddingSettings

if TYPE_CHECKING:
    import argparse

    from palimpsest.api.settings import ApiSettings
    from palimpsest.projections.runtime import Runtime
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["run_config", "run_migrate"]


def run_config(db: DatabaseSettings, api: ApiSettings) -> int:
    """Print the effective settings as JSON, secrets masked."""
    drains = DrainSettings()
    embedding = EmbeddingSettings()
    shown = {
        **db.model_dump(mode="json"),
        **api.model_dump(mode="json"),
        **drains.model_dump(mode="json"),
        **embedding.model_dump(mode="json"),
    }
    shown["broker_url"] = "********" if drains.broker_url else None
    shown["embedding_api_key"] = "********" if embedding.embedding_api_key else None
    shown["database_url"] = _masked_url(db)
    shown["embedded"] = db.embedded
    print(json.dumps(shown, indent=2, sort_keys=True))
    return EXIT_OK


def _masked_url(settings: DatabaseSettings) -> str | None:
    if settings.database_url is None:
        return None
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(settings.database_url.get_secret_value())
    if params.get("password"):
        params["password"] = "********"
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def run_migrate(runtime: Runtime, args: argparse.Namespace) -> int:
    """Report the schema current: starting ``runtime`` has applied every migration
    (each reported as it was applied) and the revision it is at."""
    from palimpsest.projections.store.migrations import schema_version

    print(f"schema is current (revision {schema_version(runtime.database)})", file=sys.stderr)
    return EXIT_OK
