"""Tenants, principals and bearer tokens: issuing them and authenticating them.

A token reads ``pal_<tenant id hex>_<secret>``. The tenant part lets the
lookup run under that tenant's row-level security, with no role that can
see every tenant's tokens; the secret part is 256 random bits. Only the
SHA-256 digest of the whole token is stored, in the ``TokenIssued`` event
and in the ``tokens`` lookup row written with it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError

from domain.errors import AuthenticationError, NotFoundError
from domain.tenant import Tenant
from projections.commands.caller import Caller
from projections.store.eventlog import EventLog, TokenRow, WriteContext
from projections.store.sql import schema_sql
from projections.store.tenancy import tenant_scope, tenant_transaction

__all__ = [
    "IssuedToken",
    "authenticate",
    "create_tenant",
    "issue_token",
    "token_digest",
]

_TOKEN_PATTERN = re.compile(r"^pal_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class IssuedToken:
    """A token as shown once to whoever asked for it."""

    tenant_id: UUID
    principal_id: UUID
    principal_name: str
    role: str
    token: str


def token_digest(token: str) -> str:
    """Return the stored digest of a bearer token."""
    return "sha256:" + hashlib.sha256(token.encode("ascii")).hexdigest()


def _new_token(tenant_id: UUID) -> str:
    return f"pal_{tenant_id.hex}_{secrets.token_urlsafe(32)}"


def _issue(
    tenant: Tenant, name: str, role: str, *, issuer_id: UUID
) -> tuple[IssuedToken, TokenRow]:
    holder_id = tenant.register_principal(name, principal_id=issuer_id)
    token = _new_token(tenant.id)
    token_id = uuid4()
    digest = token_digest(token)
    tenant.issue_token(token_id, holder_id, role, digest, principal_id=issuer_id)
    row = TokenRow(digest, token_id, holder_id, name, role)
    return IssuedToken(tenant.id, holder_id, name, role, token), row


def create_tenant(log: EventLog, name: str, admin_name: str = "admin") -> IssuedToken:
    """Create a tenant with an admin principal, and return the admin's token."""
    tenant_id = uuid4()
    tenant = Tenant.create(tenant_id, name, admin_name)
    issued, row = _issue(tenant, admin_name, "admin", issuer_id=tenant.founder_id)
    log.record([tenant], WriteContext(tenant_id=tenant_id, tokens=[row]))
    return issued


def issue_token(log: EventLog, tenant_id: UUID, principal_name: str, role: str) -> IssuedToken:
    """Issue a token to ``principal_name`` (registered if new) in a tenant.

    The command line acts as the operator who created the tenant, so its
    founding admin is recorded as the principal that caused the events.

    Raises:
        NotFoundError: the tenant does not exist.
        InvalidInputError: the role is unknown.
    """
    with tenant_scope(tenant_id):
        try:
            tenant: object = log.repository.get(tenant_id)
        except AggregateNotFoundError:
            tenant = None
        if not isinstance(tenant, Tenant):
            msg = f"tenant {tenant_id} not found"
            raise NotFoundError(msg)
        issued, row = _issue(tenant, principal_name, role, issuer_id=tenant.founder_id)
        log.record([tenant], WriteContext(tenant_id=tenant_id, tokens=[row]))
    return issued


def authenticate(log: EventLog, token: str) -> Caller:
    """Return the caller a bearer token stands for.

    Raises:
        AuthenticationError: the token is malformed or unknown.
    """
    match = _TOKEN_PATTERN.match(token)
    if match is None:
        msg = "the bearer token is malformed; expected pal_<tenant>_<secret>"
        raise AuthenticationError(msg)
    tenant_id = UUID(hex=match.group(1))
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT principal_id, principal_name, role,"
                " (SELECT decision_id FROM {schema}.tenant_deletions) AS closed_by"
                " FROM {schema}.tokens WHERE token_digest = %s",
                log.datastore.schema,
            ),
            (token_digest(token),),
        )
        row = cur.fetchone()
    if row is None:
        msg = "the bearer token is not valid"
        raise AuthenticationError(msg)
    return Caller(
        tenant_id, row["principal_id"], row["principal_name"], row["role"], row["closed_by"]
    )
