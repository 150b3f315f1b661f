"""Tenant and token administration: ``palimpsest tenant create`` and ``token create``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.cli.console import print_json
from api.cli.exit_code import EXIT_OK
from projections.commands.tokens import create_tenant, issue_token

if TYPE_CHECKING:
    import argparse

    from projections.runtime import Runtime

__all__ = ["run_tenant_create", "run_token_create"]


def run_tenant_create(runtime: Runtime, args: argparse.Namespace) -> int:
    """Create tenant ``args.name`` with its admin; print the tenant id and admin token."""
    issued = create_tenant(runtime.log, args.name, args.admin)
    print_json(
        {
            "tenant_id": str(issued.tenant_id),
            "principal": issued.principal_name,
            "role": issued.role,
            "token": issued.token,
        }
    )
    return EXIT_OK


def run_token_create(runtime: Runtime, args: argparse.Namespace) -> int:
    """Issue a token with ``args.role`` to a principal of ``args.tenant``; print it."""
    issued = issue_token(runtime.log, args.tenant, args.principal, args.role)
    print_json(
        {
            "tenant_id": str(issued.tenant_id),
            "principal": issued.principal_name,
            "principal_id": str(issued.principal_id),
            "role": issued.role,
            "token": issued.token,
        }
    )
    return EXIT_OK
