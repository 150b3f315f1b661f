"""The ``palimpsest`` command line."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from api.logformat import configure_logging
from api.settings import ApiSettings
from domain.errors import ConfigurationError, InvalidInputError, NotFoundError, PalimpsestError
from domain.role import ROLES
from projections.commands.tokens import create_tenant, issue_token
from projections.drains.hints import broker_for, send_drain_hint
from projections.drains.loop import DrainLoop
from projections.drains.settings import DrainSettings
from projections.history.rebuild import rebuild
from projections.history.replay import replay_beliefs
from projections.history.verify import verify
from projections.recall.indexing import reindex
from projections.recall.settings import EmbeddingSettings
from projections.runtime import Runtime, start_runtime
from projections.store.embedded import ServeLock
from projections.store.errors import DatabaseUnavailableError
from projections.store.migrations import EVENTS_TABLE
from projections.store.settings import DatabaseSettings

__all__ = [
    "EXIT_DATABASE",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "main",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_DATABASE = 3
EXIT_INTERRUPTED = 130

_log = logging.getLogger("palimpsest.cli")
ADMIN_TOKEN_FILE = "admin-token"


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
    rebuild_cmd = sub.add_parser(
        "rebuild", help="rebuild every read model from the log, then swap it in"
    )
    sub.add_parser("reindex", help="embed every memory not yet embedded with the configured model")
    verify = sub.add_parser("verify", help="compare the read models with a recomputation")
    verify.add_argument("--tenant", type=_uuid, help="only this tenant")
    for command in (rebuild_cmd, verify):
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


def _masked_url(settings: DatabaseSettings) -> str | None:
    if settings.database_url is None:
        return None
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(settings.database_url.get_secret_value())
    if params.get("password"):
        params["password"] = "********"
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def _print_config(db: DatabaseSettings, api: ApiSettings) -> None:
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


def _bootstrap_default_tenant(runtime: Runtime, data_dir: Path) -> None:
    """On the first serve of an empty embedded store, create tenant ``default``."""
    token_file = data_dir / ADMIN_TOKEN_FILE
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{runtime.database.schema}"."{EVENTS_TABLE}"'
        ).fetchone()
    if token_file.exists() or (row is not None and row[0] > 0):
        return
    issued = create_tenant(runtime.log, "default")
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(issued.token + "\n")
    print(f"created tenant 'default' ({issued.tenant_id})", file=sys.stderr)
    print(f"admin token (shown once, also saved to {token_file}):", file=sys.stderr)
    print(issued.token, file=sys.stderr)


def _drains(runtime: Runtime) -> tuple[DrainLoop | None, Callable[[], None]]:
    """Return the in-process drain loop (none with BROKER_URL) and the wake-up hint."""
    drains = DrainSettings()
    if drains.broker_url is not None:
        broker = broker_for(drains.broker_url.get_secret_value())
        return None, lambda: send_drain_hint(broker)
    loop = DrainLoop(
        runtime.log,
        sweep_s=drains.sweep_interval_s,
        batch=drains.drain_batch,
        lease_s=drains.drain_lease_s,
        embedder=runtime.embedder,
    )
    loop.start()
    return loop, loop.wake


def _serve(db: DatabaseSettings, api: ApiSettings) -> int:
    import uvicorn

    from api.app import create_app

    lock = ServeLock(db.data_dir) if db.embedded else None
    if lock is not None:
        lock.acquire()
    # SIGTERM must run atexit handlers, or the embedded PostgreSQL outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        runtime = start_runtime(db, progress=_log.info)
        try:
            if db.embedded:
                _bootstrap_default_tenant(runtime, db.data_dir)
            loop, wake = _drains(runtime)
            app = create_app(api, runtime, wake)
            # Everything loaded so far lives as long as the process: moving it out
            # of the collector's reach keeps full collections short. Without it,
            # they added 30-40 ms to the slowest 1% of as-of reads of long memories.
            gc.freeze()
            _log.info(
                "serving",
                extra={
                    "host": api.host,
                    "port": api.port,
                    "embedded": db.embedded,
                    "drains": "broker" if loop is None else "in-process",
                },
            )
            try:
                uvicorn.run(app, host=api.host, port=api.port, log_config=None, access_log=False)
            finally:
                if loop is not None:
                    loop.stop()
        finally:
            runtime.close()
    finally:
        if lock is not None:
            lock.release()
    return EXIT_OK


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
    if args.command == "config":
        _print_config(db, api)
        return EXIT_OK
    if args.command == "serve":
        return _serve(db, api)
    runtime = start_runtime(db, progress=lambda line: print(line, file=sys.stderr))
    try:
        if args.command == "migrate":
            print("schema is current", file=sys.stderr)
        elif args.command == "tenant":
            issued = create_tenant(runtime.log, args.name, args.admin)
            print(
                json.dumps(
                    {
                        "tenant_id": str(issued.tenant_id),
                        "principal": issued.principal_name,
                        "role": issued.role,
                        "token": issued.token,
                    }
                )
            )
        elif args.command == "token":
            issued = issue_token(runtime.log, args.tenant, args.principal, args.role)
            print(
                json.dumps(
                    {
                        "tenant_id": str(issued.tenant_id),
                        "principal": issued.principal_name,
                        "principal_id": str(issued.principal_id),
                        "role": issued.role,
                        "token": issued.token,
                    }
                )
            )
        elif args.command in {"replay", "rebuild", "verify"}:
            return _history_command(runtime, args)
        elif args.command == "reindex":
            try:
                embedded = reindex(runtime.log, runtime.embedder, report=_stderr)
            except KeyboardInterrupt:
                _stderr("palimpsest reindex: interrupted; what was embedded stays")
                return EXIT_INTERRUPTED
            print(json.dumps({"embedded": embedded, "model": runtime.embedder.model_id}))
    finally:
        runtime.close()
    return EXIT_OK


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _history_command(runtime: Runtime, args: argparse.Namespace) -> int:
    """Run replay, rebuild or verify; Ctrl-C stops cleanly (exit 130)."""
    try:
        if args.command == "replay":
            out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
            try:
                for line in replay_beliefs(
                    runtime,
                    at_position=args.at_position,
                    as_of=args.as_of,
                    tenant=args.tenant,
                    report=_stderr,
                ):
                    out.write(json.dumps(line) + "\n")
            finally:
                if args.out:
                    out.close()
            return EXIT_OK
        if args.command == "rebuild":
            done = rebuild(runtime.database, workers=args.workers, report=_stderr)
            print(
                json.dumps(
                    {
                        "tenants": done.tenants,
                        "events": done.events,
                        "position": done.position,
                        "caught_up_tenants": done.caught_up,
                        "seconds": round(done.seconds, 3),
                        "events_per_s": round(done.events / max(done.seconds, 1e-9)),
                        "swap_seconds": round(done.swap_seconds, 3),
                        "workers": done.workers,
                    }
                )
            )
            return EXIT_OK
        found = verify(runtime.database, tenant=args.tenant, workers=args.workers, report=_stderr)
        for divergence in found.divergences:
            print(json.dumps(divergence.as_dict()))
        summary = (
            f"verify: position {found.position}, {found.tenants} tenants, {found.events:,} "
            f"events, {found.rows:,} rows compared, {found.pending} memories pending revision, "
            f"{len(found.divergences)} divergences"
        )
        _stderr(summary)
        return EXIT_FAILURE if found.divergences else EXIT_OK
    except KeyboardInterrupt:
        _stderr(f"palimpsest {args.command}: interrupted; live read models unchanged")
        return EXIT_INTERRUPTED


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


if __name__ == "__main__":
    sys.exit(main())
