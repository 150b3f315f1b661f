"""``palimpsest forgetting-pass``: run the forgetting pass once, through the running
service's API.

With the pass off (``PALIMPSEST_FORGETTING_PASS_ENABLED`` false) it exits 0
having read nothing: no settings of a database, no request. On, it sends
``POST /v1/forgetting/runs`` to the service (``--url``, default the serve
address) with an admin token of the tenant to judge (``PALIMPSEST_TOKEN``,
else the embedded default tenant's admin token file) and prints the
service's report as one JSON line. A token names one tenant; ``--tenant``
(an id or a name) checks it is the one meant before anything runs.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

from api.cli.admin import admin_token_path
from api.cli.console import print_json, report
from api.cli.exit_code import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from projections.drains.settings import ForgettingPassSettings

if TYPE_CHECKING:
    import argparse

    from api.settings import ApiSettings
    from projections.store.settings import DatabaseSettings

__all__ = ["run_forgetting_pass"]

_TIMEOUT_S = 3600.0
"""How long the one-shot waits for the service: a pass with a real model takes minutes."""


def _token(db: DatabaseSettings) -> str | None:
    token = os.environ.get("PALIMPSEST_TOKEN")
    if token:
        return token.strip()
    path = admin_token_path(db.data_dir) if db.embedded else None
    if path is not None and path.exists():
        return path.read_text().strip()
    return None


def run_forgetting_pass(db: DatabaseSettings, api: ApiSettings, args: argparse.Namespace) -> int:
    """Ask the running service to run the pass over the token's tenant; print its report."""
    if not ForgettingPassSettings().forgetting_pass_enabled:
        report("palimpsest forgetting-pass: the pass is off (PALIMPSEST_FORGETTING_PASS_ENABLED)")
        return EXIT_OK
    token = _token(db)
    if token is None:
        report("palimpsest: error: no token: set PALIMPSEST_TOKEN to an admin token of the tenant")
        return EXIT_USAGE
    base = (args.url or f"http://{api.host}:{api.port}").rstrip("/")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    url = base + "/v1/tenant/judgment"
    try:
        if args.tenant is not None:
            asked = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(asked, timeout=30) as response:
                whose = json.loads(response.read())
            if args.tenant not in (whose["tenant_id"], whose["tenant_name"]):
                report(
                    f"palimpsest: error: the token is tenant {whose['tenant_name']!r}'s, "
                    f"not {args.tenant!r}'s"
                )
                return EXIT_USAGE
        url = base + "/v1/forgetting/runs"
        body = json.dumps({"dry_run": bool(args.dry_run)}).encode()
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            print_json(json.loads(response.read()))
            return EXIT_OK
    except urllib.error.HTTPError as e:
        try:
            problem = json.loads(e.read())
            why = f"{problem.get('title')} ({problem.get('type')}): {problem.get('detail')}"
        except ValueError:
            why = f"HTTP {e.code}"
        report(f"palimpsest: error: the service refused the pass: {why}")
        return EXIT_FAILURE
    except (urllib.error.URLError, OSError) as e:
        report(f"palimpsest: error: cannot reach the service at {url}: {e}")
        return EXIT_FAILURE
