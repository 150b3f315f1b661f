"""The command line's verbs and options, parsed with the standard library alone.

Parsing imports nothing of the server (``--version`` and ``--help`` work on the
base install, the client only); the server is imported once a verb has been
parsed (:mod:`palimpsest.api.cli._entry`).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import palimpsest
from palimpsest.domain.role import ROLES

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["parse_arguments", "parser"]

_MCP = (
    "Serve the MCP tools over stdin and stdout for one local agent, on the store itself "
    "(docs/agents.md). PALIMPSEST_TOKEN is required: the token (palimpsest token create) "
    "the tools act as."
)
_REVOKE = (
    "Revoke a token: it no longer authenticates. A running serve may still accept it for "
    "up to PALIMPSEST_TOKEN_CACHE_S seconds (5 by default) after this returns, trusting "
    "a check of it made before; never longer."
)
_STORE = (
    "Runs on an existing store (the data directory's, or DATABASE_URL's schema); only "
    "serve and migrate create one."
)


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv`` (default ``sys.argv[1:]``).

    Raises:
        argparse.ArgumentError: the arguments are wrong (its message says how).
        SystemExit: ``--help`` or ``--version`` printed what was asked (code 0).
    """
    return parser().parse_args(argv)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit would print usage twice
        raise argparse.ArgumentError(None, message)


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

    def add(
        self, name: str, help_text: str, description: str | None = None
    ) -> argparse.ArgumentParser:
        """Add verb ``name``: ``help_text`` in its parent's list, ``description`` (by
        default the same, as a sentence) atop its own ``--help``."""
        sentence = f"{help_text[0].upper()}{help_text[1:]}."
        verb: argparse.ArgumentParser = self._sub.add_parser(
            name, help=help_text, description=description or sentence
        )
        _global_options(verb, top=False)
        return verb


def parser() -> argparse.ArgumentParser:
    """Return the parser of every verb and option."""
    top = _Parser(prog="palimpsest", description="Memory for LLM agents.")
    top.add_argument("--version", action="version", version=f"palimpsest {palimpsest.__version__}")
    _global_options(top, top=True)
    sub = _Commands(top, "command")
    serve = sub.add("serve", "migrate, then serve HTTP")
    serve.add_argument("--host", help="address to bind (PALIMPSEST_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (PALIMPSEST_PORT, default 8080)")
    serve.add_argument("--workers", type=int, help="HTTP processes (PALIMPSEST_WORKERS, default 1)")
    mcp = sub.add("mcp", "serve the MCP tools over stdin/stdout as PALIMPSEST_TOKEN", _MCP)
    sub.add("migrate", "apply schema migrations (creating the store if there is none)")
    sub.add("config", "print every effective setting, secrets masked; refuse an invalid one")
    tenant = _Commands(sub.add("tenant", "manage tenants"), "action")
    create = tenant.add("create", "create a tenant; prints its id and admin token")
    create.add_argument("name", help="a name no other tenant has")
    create.add_argument("--admin", default="admin", help="name of the admin principal")
    tenant_list = tenant.add("list", "list every tenant's id and name")
    token = _Commands(sub.add("token", "manage tokens"), "action")
    token_create = token.add("create", "issue a token to a principal")
    token_create.add_argument("--tenant", required=True, help="tenant id or name")
    token_create.add_argument("--principal", required=True, help="principal name")
    token_create.add_argument("--role", required=True, choices=ROLES)
    token_list = token.add("list", "list a tenant's tokens (ids, holders and roles; no secrets)")
    token_list.add_argument("--tenant", required=True, help="tenant id or name")
    token_revoke = token.add("revoke", "revoke a token: it no longer authenticates", _REVOKE)
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
    rebuild.add_argument("--tenant", type=_uuid, help="only this tenant, in place")
    reindex = sub.add("reindex", "embed every memory not yet embedded with the configured model")
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
    cycle.add_argument(
        "--json", action="store_true", help="print the whole report as JSON, not the summary"
    )
    for command in (rebuild, verify):
        command.add_argument(
            "--workers", type=_workers, help="processes replaying tenants (default: one per core)"
        )
    for on_a_store in (
        mcp,
        create,
        tenant_list,
        token_create,
        token_list,
        token_revoke,
        replay,
        rebuild,
        reindex,
        verify,
    ):
        on_a_store.epilog = _STORE
    return top


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
