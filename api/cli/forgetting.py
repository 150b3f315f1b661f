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

from typing import TYPE_CHECKING

from palimpsest.api.cli.console import report
from palimpsest.api.cli.exit_code import EXIT_OK
from palimpsest.api.cli.service_run import run_through_service
from palimpsest.projections.drains.settings import ForgettingPassSettings

if TYPE_CHECKING:
    import argparse

    from palimpsest.api.settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["run_forgetting_pass"]


def run_forgetting_pass(db: DatabaseSettings, api: ApiSettings, args: argparse.Namespace) -> int:
    """Ask the running service to run the pass over the token's tenant; print its report."""
    if not ForgettingPassSettings().forgetting_pass_enabled:
        report("palimpsest forgetting-pass: the pass is off (PALIMPSEST_FORGETTING_PASS_ENABLED)")
        return EXIT_OK
    return run_through_service(db, api, args, path="/v1/forgetting/runs", job="pass")
