"""Running one parsed command: its settings, the store it works on, and its verb.

Only ``serve`` and ``migrate`` may create a store; every other verb that works on
one opens it only if it is there (:mod:`palimpsest.api.cli._store`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from palimpsest.api._logformat import configure_logging
from palimpsest.api._settings import ApiSettings
from palimpsest.api.cli._admin import (
    run_tenant_create,
    run_tenant_list,
    run_token_create,
    run_token_list,
    run_token_path,
    run_token_revoke,
)
from palimpsest.api.cli._console import report
from palimpsest.api.cli._cycle import run_decay_cycle
from palimpsest.api.cli._deployment import run_config, run_migrate
from palimpsest.api.cli._exit_code import EXIT_USAGE
from palimpsest.api.cli._forgetting import run_forgetting_pass
from palimpsest.api.cli._history import run_rebuild, run_replay, run_verify
from palimpsest.api.cli._reindex import run_reindex
from palimpsest.api.cli._serve import run_serve
from palimpsest.api.cli._store import missing_store
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.settings import DatabaseSettings

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from palimpsest.projections.runtime import Runtime

__all__ = ["run_command"]


def _run_mcp(db: DatabaseSettings, api: ApiSettings) -> int:
    # Imported for mcp alone: the MCP server and FastAPI take seconds to import,
    # which every other verb would wait for.
    from palimpsest.api.cli._mcp_stdio import run_mcp

    return run_mcp(db, api)


# Commands (verb, and action for those that have one) that need only their
# settings; every other one runs on a started runtime.
_SETTINGS_COMMANDS: dict[tuple[str, str | None], Callable[[DatabaseSettings, ApiSettings], int]] = {
    ("config", None): run_config,
    ("serve", None): run_serve,
    ("mcp", None): _run_mcp,
    ("token", "path"): run_token_path,
}
_RUNTIME_COMMANDS: dict[tuple[str, str | None], Callable[[Runtime, argparse.Namespace], int]] = {
    ("migrate", None): run_migrate,
    ("rebuild", None): run_rebuild,
    ("reindex", None): run_reindex,
    ("replay", None): run_replay,
    ("tenant", "create"): run_tenant_create,
    ("tenant", "list"): run_tenant_list,
    ("token", "create"): run_token_create,
    ("token", "list"): run_token_list,
    ("token", "revoke"): run_token_revoke,
    ("verify", None): run_verify,
}
_CREATES_A_STORE = {("migrate", None)}
"""Runtime commands that may create the store they run on (``serve`` creates its own)."""


def run_command(args: argparse.Namespace) -> int:
    """Run the command ``args`` names; return its exit code.

    Raises:
        pydantic.ValidationError: a setting is invalid.
        PalimpsestError: the command failed (the entry point reports it).
    """
    overrides: dict[str, Any] = {}
    if args.data_dir is not None:
        overrides["data_dir"] = args.data_dir
    db = DatabaseSettings(**overrides)
    api_overrides = {
        k: v for k in ("host", "port", "workers") if (v := getattr(args, k, None)) is not None
    }
    api = ApiSettings(**api_overrides)
    # One-shot commands print their result; their log shows only what went wrong.
    quiet = "WARNING" if args.command != "serve" else api.log_level
    configure_logging("DEBUG" if args.debug else quiet)
    command = (args.command, getattr(args, "action", None))
    if command in _SETTINGS_COMMANDS:
        return _SETTINGS_COMMANDS[command](db, api)
    if command == ("forgetting-pass", None):  # a client of the running service
        return run_forgetting_pass(db, api, args)
    if command == ("cycle", None):  # a client of the running service
        return run_decay_cycle(db, api, args)
    if command not in _CREATES_A_STORE and (missing := missing_store(db)) is not None:
        report(f"palimpsest: error: {missing}")
        return EXIT_USAGE
    runtime = start_runtime(db, progress=report)
    try:
        return _RUNTIME_COMMANDS[command](runtime, args)
    finally:
        runtime.close()
