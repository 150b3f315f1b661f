"""Preparing a deployment: ``palimpsest config`` shows the settings, ``migrate`` the schema."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from palimpsest.api.cli._every_setting import read_every_setting, shown_settings
from palimpsest.api.cli._exit_code import EXIT_OK

if TYPE_CHECKING:
    import argparse

    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.runtime import Runtime
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["run_config", "run_migrate"]


def run_config(db: DatabaseSettings, api: ApiSettings) -> int:
    """Print every room's effective settings as JSON, secrets masked.

    Raises:
        pydantic.ValidationError: a setting is invalid (nothing is printed).
    """
    print(json.dumps(shown_settings(read_every_setting(db, api)), indent=2, sort_keys=True))
    return EXIT_OK


def run_migrate(runtime: Runtime, args: argparse.Namespace) -> int:
    """Report the schema current: starting ``runtime`` has applied every migration
    (each reported as it was applied) and the revision it is at."""
    from palimpsest.projections.store.migrations import schema_version

    print(f"schema is current (revision {schema_version(runtime.database)})", file=sys.stderr)
    return EXIT_OK
