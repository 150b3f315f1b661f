"""``palimpsest forgetting-pass``: run the forgetting pass once, through the running
service's API.

It sends ``POST /v1/forgetting/runs`` to the service (``--url``, default the
serve address) with an admin token of the tenant to judge
(``PALIMPSEST_TOKEN``, else the embedded default tenant's admin token file)
and prints the service's report as one JSON line. Whether there is a pass,
and which judge it has, is the service's to say, never this process's
environment: a service that runs none answers ``pass-disabled``, which is
printed and exits 0; with the operator judge the report counts the items
``queued`` for people. A token names one tenant; ``--tenant`` (an id or a
name) checks it is the one meant before anything runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palimpsest.api.cli._service_run import run_through_service

if TYPE_CHECKING:
    import argparse

    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["run_forgetting_pass"]


def run_forgetting_pass(db: DatabaseSettings, api: ApiSettings, args: argparse.Namespace) -> int:
    """Ask the running service to run the pass over the token's tenant; print its report."""
    return run_through_service(
        db, api, args, path="/v1/forgetting/runs", job="pass", not_an_error="pass-disabled"
    )
