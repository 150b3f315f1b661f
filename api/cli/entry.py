"""The entry point: parse the arguments, run one command, translate failures to exit codes.

Every failure is one line on stderr, ``palimpsest: error: <message>``, and a
named exit code (:mod:`api.cli.exit_code`); ``--debug`` shows the traceback.
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

from api.cli.admin import run_tenant_create, run_token_create
from api.cli.console import report
from api.cli.deployment import run_config, run_migrate
from api.cli.exit_code import EXIT_DATABASE, EXIT_FAILURE, EXIT_USAGE
from api.cli.history import run_rebuild, run_replay, run_verify
from api.cli.reindex import run_reindex
from api.cli.serve import run_serve
from api.logformat import configure_logging
from api.settings import ApiSettings
from domain.errors import ConfigurationError, InvalidInputError, NotFoundError, PalimpsestError
from domain.role import ROLES
from projections.runtime import start_runtime
from projections.store.errors import DatabaseUnavailableError
from projections.store.settings import DatabaseSettings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from projections.runtime import Runtime

__all__ = ["main"]

# Commands that need only their settings; every other one runs on a started runtime.
_SETTINGS_COMMANDS: dict[str, Callable[[DatabaseSettings, ApiSettings], int]] = {
    "config": run_config,
    "serve": run_serve,
}
_RUNTIME_COMMANDS: dict[str, Callable[[Runtime, argparse.Namespace], int]] = {
    "migrate": run_migrate,
    "rebuild": run_rebuild,
    "reindex": run_reindex,
    "replay": run_replay,
    "tenant": run_tenant_create,
    "token": run_token_create,
    "verify": run_verify,
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
    api_overrides = {k: v for k in ("host", "port") if (v := getattr(args, k, None)) is not None}
    api = ApiSettings(**api_overrides)
    # One-shot commands print their result; their log shows only what went wrong.
    quiet = "WARNING" if args.command != "serve" else api.log_level
    configure_logging("DEBUG" if args.debug else quiet)
    if args.command in _SETTINGS_COMMANDS:
        return _SETTINGS_COMMANDS[args.command](db, api)
    runtime = start_runtime(db, progress=report)
    try:
        return _RUNTIME_COMMANDS[args.command](runtime, args)
    finally:
        runtime.close()


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit would print usage twice
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="palimpsest", description="Memory for LLM agents.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument(
        "--data-dir", type=Path, help="embedded data directory (PALIMPSEST_DATA_DIR)"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve = sub.add_parser("serve", help="migrate, then serve HTTP")
    serve.add_argument("--host", help="address to bind (PALIMPSEST_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (PALIMPSEST_PORT, default 8080)")
    sub.add_parser("migrate", help="apply schema migrations")
    sub.add_parser("config", help="print the effective settings, secrets masked")
    tenant = sub.add_parser("tenant", help="manage tenants")
    tenant_sub = tenant.add_subparsers(dest="action", required=True, parser_class=_Parser)
    create = tenant_sub.add_parser("create", help="create a tenant; prints its id and admin token")
    create.add_argument("name")
    create.add_argument("--admin", default="admin", help="name of the admin principal")
    token = sub.add_parser("token", help="manage tokens")
    token_sub = token.add_subparsers(dest="action", required=True, parser_class=_Parser)
    token_create = token_sub.add_parser("create", help="issue a token to a principal")
    token_create.add_argument("--tenant", required=True, type=_uuid, help="tenant id")
    token_create.add_argument("--principal", required=True, help="principal name")
    token_create.add_argument("--role", required=True, choices=ROLES)
    replay = sub.add_parser("replay", help="print the beliefs at a log position or time")
    point = replay.add_mutually_exclusive_group(required=True)
    point.add_argument("--at-position", type=_position, help="log position")
    point.add_argument("--as-of", type=_time, help="RFC 3339 time, with its offset")
    replay.add_argument("--tenant", type=_uuid, help="only this tenant")
    replay.add_argument("--out", type=Path, help="write JSON lines here (default stdout)")
    rebuild = sub.add_parser(
        "rebuild", help="rebuild every read model from the log, then swap it in"
    )
    sub.add_parser("reindex", help="embed every memory not yet embedded with the configured model")
    verify = sub.add_parser("verify", help="compare the read models with a recomputation")
    verify.add_argument("--tenant", type=_uuid, help="only this tenant")
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
