"""Tenant and token administration: ``palimpsest tenant create|list`` and
``token create|list|revoke|path``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from palimpsest.api.cli._console import print_json
from palimpsest.api.cli._exit_code import EXIT_OK
from palimpsest.domain.errors import NotFoundError
from palimpsest.domain.tenant import colliding_names
from palimpsest.projections.commands.tokens import (
    create_tenant,
    find_tenant,
    issue_token,
    list_tenants,
    list_tokens,
    revoke_token,
)

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.runtime import Runtime
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = [
    "ADMIN_TOKEN_FILE",
    "admin_token_path",
    "run_tenant_create",
    "run_tenant_list",
    "run_token_create",
    "run_token_list",
    "run_token_path",
    "run_token_revoke",
]

ADMIN_TOKEN_FILE = "admin-token"
"""Where, in the embedded data directory, the first ``serve`` saves tenant
``default``'s admin token."""


def admin_token_path(data_dir: Path) -> Path:
    """Return the file the first ``serve`` on ``data_dir`` saves its admin token to."""
    return data_dir / ADMIN_TOKEN_FILE


def run_tenant_create(runtime: Runtime, args: argparse.Namespace) -> int:
    """Create tenant ``args.name`` with its admin; print the tenant id and admin token.

    A name another tenant has, or one that reads the same (another case, width or
    surrounding space), is refused (exit 1), and so is a name with control, invisible
    or bidi characters or letters of two scripts; nothing is written.
    """
    issued = create_tenant(runtime.log, args.name, args.admin)
    print_json(
        {
            "tenant_id": str(issued.tenant_id),
            "principal": issued.principal_name,
            "role": issued.role,
            "token_id": str(issued.token_id),
            "token": issued.token,
        }
    )
    return EXIT_OK


def run_tenant_list(runtime: Runtime, args: argparse.Namespace) -> int:
    """Print every tenant, one JSON line each, by name.

    A store may hold names recorded before names were compared without case, width
    and surrounding space (``default`` and ``DEFAULT``): each such tenant's line names
    the others in ``name_collides_with``, so an operator sees which ``--tenant NAME``
    is ambiguous (it finds the exact name) and can delete or keep them knowingly.
    """
    entries = list_tenants(runtime.log)
    collisions = colliding_names((e.tenant_id, e.name) for e in entries)
    others = {
        tenant_id: [str(other) for other in group if other != tenant_id]
        for group in collisions
        for tenant_id in group
    }
    for entry in entries:
        line: dict[str, str | list[str]] = {
            "tenant_id": str(entry.tenant_id),
            "name": entry.name,
            "created_at": entry.created_at.isoformat(),
        }
        if entry.tenant_id in others:
            line["name_collides_with"] = others[entry.tenant_id]
        print_json(line)
    return EXIT_OK


def run_token_create(runtime: Runtime, args: argparse.Namespace) -> int:
    """Issue a token with ``args.role`` to a principal of ``args.tenant`` (an id or a
    name); print it."""
    tenant_id = find_tenant(runtime.log, args.tenant)
    issued = issue_token(runtime.log, tenant_id, args.principal, args.role)
    print_json(
        {
            "tenant_id": str(issued.tenant_id),
            "principal": issued.principal_name,
            "principal_id": str(issued.principal_id),
            "role": issued.role,
            "token_id": str(issued.token_id),
            "token": issued.token,
        }
    )
    return EXIT_OK


def run_token_list(runtime: Runtime, args: argparse.Namespace) -> int:
    """Print the tokens of ``args.tenant`` that authenticate, one JSON line each
    (ids, holders and roles; never a secret)."""
    tenant_id = find_tenant(runtime.log, args.tenant)
    for entry in list_tokens(runtime.log, tenant_id):
        print_json(
            {
                "token_id": str(entry.token_id),
                "principal": entry.principal_name,
                "principal_id": str(entry.principal_id),
                "role": entry.role,
            }
        )
    return EXIT_OK


def run_token_revoke(runtime: Runtime, args: argparse.Namespace) -> int:
    """Revoke token ``args.token_id`` of ``args.tenant``: it no longer authenticates.

    Revoking a token already revoked changes nothing and succeeds.
    """
    tenant_id = find_tenant(runtime.log, args.tenant)
    revoked = revoke_token(runtime.log, tenant_id, args.token_id)
    print_json({"token_id": str(args.token_id), "revoked": True, "already": not revoked})
    return EXIT_OK


def run_token_path(db: DatabaseSettings, api: ApiSettings) -> int:
    """Print the path of the admin token the first ``serve`` saves (embedded only).

    Raises:
        NotFoundError: the database is external: ``serve`` saves no token then.
    """
    if not db.embedded:
        msg = (
            "serve saves an admin token only for an embedded data directory; "
            "with DATABASE_URL, create a tenant with: palimpsest tenant create NAME"
        )
        raise NotFoundError(msg)
    print(admin_token_path(db.data_dir))
    return EXIT_OK
