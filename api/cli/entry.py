"""The entry point: parse the arguments, run one command, translate failures to exit codes.

Every failure is one line on stderr, ``palimpsest: error: <message>``, and a
named exit code (:mod:`palimpsest.api.cli.exit_code`); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import ValidationError

from palimpsest.api.cli.admin import (
    run_tenant_create,
    run_tenant_list,
    run_token_create,
    run_token_list,
    run_token_path,
    run_token_revoke,
)
from palimpsest.api.cli.console import report
from palimpsest.api.cli.cycle import run_decay_cycle
from palimpsest.api.cli.deployment import run_config, run_migrate
from palimpsest.api.cli.exit_code import EXIT_DATABASE, EXIT_FAILURE, EXIT_USAGE
from palimpsest.api.cli.forgetting import run_forgetting_pass
from palimpsest.api.cli.history import run_rebuild, run_replay, run_verify
from palimpsest.api.cli.mcp_stdio import run_mcp
from palimpsest.api.cli.reindex import run_reindex
from palimpsest.api.cli.serve import run_serve
from palimpsest.api.logformat import configure_logging
from palimpsest.api.settings import ApiSettings
from palimpsest.domain.errors import (
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
    PalimpsestError,
)
from palimpsest.domain.role import ROLES
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.errors import DatabaseUnavailableError, DataDirectoryInUseError
from palimpsest.projections.store.settings import DatabaseSettings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from palimpsest.projections.runtime import Runtime

__all__ = ["main"]

# Commands (verb, and action for those that have one) that need only their
# settings; every other one runs on a started runtime.
_SETTINGS_COMMANDS: dict[tuple[str, str | None], Callable[[DatabaseSettings, ApiSettings], int]] = {
    ("config", None): run_config,
    ("serve", None): run_serve,
    ("mcp", None): run_mcp,
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    # pgserver imports platformdirs, which warns when XDG_RUNTIME_DIR is unset.
    warnings.filterwarnings("ignore", module="platformdirs")
    try:
        args = _parser().parse_args(argv)
        return _run(args)
    except _UsageError as e:
        print(f"palimpsest: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ValidationError as e:
        print(f"palimpsest: error: {_settings_error(e)}", file=sys.stderr)
        return EXIT_USAGE
    except DataDirectoryInUseError as e:
        # A conflict over the arguments (which directory), not a database failure.
        if debug:
            raise
        print(f"palimpsest: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (InvalidInputError, NotFoundError, ConfigurationError) as e:
        if debug:
            raise
        print(f"palimpsest: error: {e}", file=sys.stderr)
        return EXIT_FAILURE if not isinstance(e, ConfigurationError) else EXIT_DATABASE
    except DatabaseUnavailableError as e:
        if debug:
            raise
        print(f"palimpsest: error: {e}", file=sys.stderr)
        return EXIT_DATABASE
    except PalimpsestError as e:
        if debug:
            raise
        print(f"palimpsest: error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


def _run(args: argparse.Namespace) -> int:
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
    runtime = start_runtime(db, progress=report)
    try:
        return _RUNTIME_COMMANDS[command](runtime, args)
    finally:
        runtime.close()


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit would print usage twice
        raise _UsageError(message)


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Add the options every command takes, before or after its verb.

    Below the top level their default is ``SUPPRESS``: a verb's parser that
    did not see one leaves what the top level parsed (or its default) alone.
    """
    keep: Any = argparse.SUPPRESS
    parser.add_argument(
        "--debug", action="store_true", default=False if top else keep, help="show tracebacks"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None if top else keep,
        help="embedded data directory (PALIMPSEST_DATA_DIR)",
    )


class _Commands:
    """Adds verbs that each take the global options (``palimpsest serve --data-dir D``)."""

    def __init__(self, parser: argparse.ArgumentParser, dest: str) -> None:
        self._sub = parser.add_subparsers(dest=dest, required=True, parser_class=_Parser)

    def add(self, name: str, help_text: str) -> argparse.ArgumentParser:
        verb: argparse.ArgumentParser = self._sub.add_parser(name, help=help_text)
        _global_options(verb, top=False)
        return verb


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="palimpsest", description="Memory for LLM agents.")
    _global_options(parser, top=True)
    sub = _Commands(parser, "command")
    serve = sub.add("serve", "migrate, then serve HTTP")
    serve.add_argument("--host", help="address to bind (PALIMPSEST_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (PALIMPSEST_PORT, default 8080)")
    serve.add_argument("--workers", type=int, help="HTTP processes (PALIMPSEST_WORKERS, default 1)")
    sub.add("mcp", "serve the MCP tools over stdin/stdout as PALIMPSEST_TOKEN (docs/agents.md)")
    sub.add("migrate", "apply schema migrations")
    sub.add("config", "print the effective settings, secrets masked")
    tenant = _Commands(sub.add("tenant", "manage tenants"), "action")
    create = tenant.add("create", "create a tenant; prints its id and admin token")
    create.add_argument("name", help="a name no other tenant has")
    create.add_argument("--admin", default="admin", help="name of the admin principal")
    tenant.add("list", "list every tenant's id and name")
    token = _Commands(sub.add("token", "manage tokens"), "action")
    token_create = token.add("create", "issue a token to a principal")
    token_create.add_argument("--tenant", required=True, help="tenant id or name")
    token_create.add_argument("--principal", required=True, help="principal name")
    token_create.add_argument("--role", required=True, choices=ROLES)
    token_list = token.add("list", "list a tenant's tokens (ids, holders and roles; no secrets)")
    token_list.add_argument("--tenant", required=True, help="tenant id or name")
    token_revoke = token.add("revoke", "revoke a token: it no longer authenticates")
    token_revoke.add_argument("token_id", type=_token_id, help="the token's id (token list)")
    token_revoke.add_argument("--tenant", required=True, help="tenant id or name")
    token.add("path", "print where serve saved the default tenant's admin token")
    replay = sub.add("replay", "print the beliefs at a log position or time")
    point = replay.add_mutually_exclusive_group(required=True)
    point.add_argument("--at-position", type=_position, help="log position")
    point.add_argument("--as-of", type=_time, help="RFC 3339 time, with its offset")
    replay.add_argument("--tenant", type=_uuid, help="only this tenant")
    replay.add_argument("--out", type=Path, help="write JSON lines here (default stdout)")
    rebuild = sub.add("rebuild", "rebuild every read model from the log, then swap it in")
    sub.add("reindex", "embed every memory not yet embedded with the configured model")
    verify = sub.add("verify", "compare the read models with a recomputation")
    verify.add_argument("--tenant", type=_uuid, help="only this tenant")
    forgetting = sub.add(
        "forgetting-pass", "run the forgetting pass once, through the running service"
    )
    forgetting.add_argument("--url", help="the service's base URL (default: serve's address)")
    forgetting.add_argument(
        "--tenant", help="the tenant (id or name) the token must belong to; refused otherwise"
    )
    forgetting.add_argument(
        "--dry-run", action="store_true", help="select and render only: judge and write nothing"
    )
    cycle = sub.add("cycle", "run the decay cycle once, through the running service")
    cycle.add_argument("--url", help="the service's base URL (default: serve's address)")
    cycle.add_argument(
        "--tenant", help="the tenant (id or name) the token must belong to; refused otherwise"
    )
    cycle.add_argument(
        "--dry-run", action="store_true", help="score and bucket only: write nothing"
    )
    for command in (rebuild, verify):
        command.add_argument(
            "--workers", type=_workers, help="processes replaying tenants (default: one per core)"
        )
    return parser


def _position(value: str) -> int:
    try:
        position = int(value)
    except ValueError:
        position = -1
    if position < 0:
        msg = f"{value!r} is not a log position (an integer >= 0)"
        raise argparse.ArgumentTypeError(msg)
    return position


def _workers(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 64:
        msg = f"{value!r} is not a number of workers (1 to 64)"
        raise argparse.ArgumentTypeError(msg)
    return int(value)


def _time(value: str) -> datetime:
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        msg = f"{value!r} is not an RFC 3339 time with an offset (e.g. 2026-10-01T00:00:00Z)"
        raise argparse.ArgumentTypeError(msg)
    return when


def _uuid(value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        msg = f"{value!r} is not a tenant id (a UUID)"
        raise argparse.ArgumentTypeError(msg) from None


def _token_id(value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        msg = f"{value!r} is not a token id (a UUID, as token list shows it)"
        raise argparse.ArgumentTypeError(msg) from None


def _settings_error(e: ValidationError) -> str:
    first = e.errors()[0]
    if not first["loc"]:  # a rule across settings: its message names them
        return f"invalid settings: {first['msg'].removeprefix('Value error, ')}"
    name = "_".join(str(p) for p in first["loc"]).upper()
    variable = name if name == "DATABASE_URL" else f"PALIMPSEST_{name}"
    shown = first.get("input")
    if any(secret in name.lower() for secret in ("url", "password", "key")):
        shown = "<hidden>"
    return f"{variable}={shown!r} is invalid: {first['msg']}"
