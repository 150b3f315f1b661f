"""``palimpsest cycle``: run the decay cycle once, through the running service's API.

It sends ``POST /v1/cycles`` to the service (``--url``, default the serve
address) and prints a one-screen summary of the service's report, each memory
by its text (:mod:`palimpsest.api.cli._cycle_summary`); ``--json`` prints the
whole report as one JSON line instead (:mod:`palimpsest.api.cli._service_run`: the
token, ``--tenant``); ``--dry-run`` scores and buckets only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from palimpsest.api.cli._console import print_json
from palimpsest.api.cli._cycle_summary import cycle_summary
from palimpsest.api.cli._service_run import run_through_service

if TYPE_CHECKING:
    import argparse

    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["run_decay_cycle"]


def _print_summary(report: Any) -> None:
    print(cycle_summary(report))


def run_decay_cycle(db: DatabaseSettings, api: ApiSettings, args: argparse.Namespace) -> int:
    """Ask the running service to run the cycle over the token's tenant; print its report."""
    render = print_json if getattr(args, "json", False) else _print_summary
    return run_through_service(db, api, args, path="/v1/cycles", job="cycle", render=render)
