"""Run one of the service's jobs once, through its API: what ``palimpsest
forgetting-pass`` and ``palimpsest cycle`` share.

The job runs inside the service, never in a second process beside it (seed
001, decision 6). The token is ``PALIMPSEST_TOKEN``, else the embedded
default tenant's admin token file; ``--tenant`` (an id or a name) checks the
token is that tenant's before anything runs; the service's report is printed
as one JSON line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from palimpsest.api.cli._admin import admin_token_path
from palimpsest.api.cli._console import print_json, report
from palimpsest.api.cli._exit_code import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from palimpsest.projections.store.http_client import HTTPCallError, get_json, post_json

if TYPE_CHECKING:
    import argparse

    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["admin_token", "run_through_service"]

_TIMEOUT_S = 3600.0
"""How long a one-shot waits for the service: a pass with a real model, or a large
tenant's cycle and its consolidation, takes minutes."""


def admin_token(db: DatabaseSettings) -> str | None:
    """Return the token one-shot clients of the service send: ``PALIMPSEST_TOKEN``,
    else the embedded default tenant's admin token file (None: neither)."""
    token = os.environ.get("PALIMPSEST_TOKEN")
    if token:
        return token.strip()
    path = admin_token_path(db.data_dir) if db.embedded else None
    if path is not None and path.exists():
        return path.read_text().strip()
    return None


def run_through_service(
    db: DatabaseSettings,
    api: ApiSettings,
    args: argparse.Namespace,
    *,
    path: str,
    job: str,
    render: Callable[[Any], None] = print_json,
    not_an_error: str | None = None,
) -> int:
    """POST ``{"dry_run": args.dry_run}`` to ``path`` of the running service (``args.url``,
    default the serve address) for the token's tenant and print the report with
    ``render``; ``job`` names it in errors. A refusal whose problem type is
    ``not_an_error`` (the service runs no such job) is reported and exits 0. Returns
    the exit code."""
    token = admin_token(db)
    if token is None:
        report("palimpsest: error: no token: set PALIMPSEST_TOKEN to an admin token of the tenant")
        return EXIT_USAGE
    base = (args.url or f"http://{api.host}:{api.port}").rstrip("/")
    url = base + "/v1/tenant/judgment"
    try:
        if args.tenant is not None:
            whose = get_json(url, timeout_s=30, api_key=token)
            if args.tenant not in (whose["tenant_id"], whose["tenant_name"]):
                report(
                    f"palimpsest: error: the token is tenant {whose['tenant_name']!r}'s, "
                    f"not {args.tenant!r}'s"
                )
                return EXIT_USAGE
        url = base + path
        body = json.dumps({"dry_run": bool(args.dry_run)}).encode()
        render(post_json(url, body, timeout_s=_TIMEOUT_S, api_key=token))
        return EXIT_OK
    except HTTPCallError as e:
        if e.status is None:
            report(f"palimpsest: error: cannot reach the service at {url}: {e}")
            return EXIT_FAILURE
        try:
            problem = json.loads(e.body)
            why = f"{problem.get('title')} ({problem.get('type')}): {problem.get('detail')}"
        except ValueError:
            problem, why = {}, f"HTTP {e.status}"
        if not_an_error is not None and str(problem.get("type", "")).endswith(f":{not_an_error}"):
            report(f"palimpsest: the service runs no {job}: {problem.get('detail')}")
            return EXIT_OK
        report(f"palimpsest: error: the service refused the {job}: {why}")
        return EXIT_FAILURE
