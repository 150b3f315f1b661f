"""Tenants, principals and bearer tokens: issuing them and authenticating them.

Tenant names are unique: creating a tenant under a name another tenant has
is refused (``ConflictError``), so an operator can name a tenant where an id
is asked for (:func:`find_tenant`). Creators take one advisory lock while
they check the name and record the tenant, so two concurrent ``tenant
create`` of one name cannot both succeed.

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
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.persistence import StoredEvent
from psycopg import Cursor

from palimpsest.domain.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
)
from palimpsest.domain.limits import MAX_LABEL_CHARS
from palimpsest.domain.tenant import Tenant, checked_tenant_name, tenant_name_key
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.store.aggregates import load_aggregate
from palimpsest.projections.store.eventlog import EventLog, TokenRow, WriteContext
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import (
    read_transaction,
    set_tenant,
    tenant_scope,
    tenant_transaction,
)

__all__ = [
    "IssuedToken",
    "TOKEN_CACHE_S",
    "TenantEntry",
    "TokenEntry",
    "authenticate",
    "create_tenant",
    "find_tenant",
    "forget_tenant_tokens",
    "issue_token",
    "list_tenants",
    "list_tokens",
    "revoke_token",
    "token_digest",
    "verified_caller",
]

_TOKEN_PATTERN = re.compile(r"^pal_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$")

_CREATE_LOCK_KEY = 0x70616C74656E  # "paltén": tenant creation, one at a time


@dataclass(frozen=True)
class IssuedToken:
    """A token as shown once to whoever asked for it."""

    tenant_id: UUID
    principal_id: UUID
    principal_name: str
    role: str
    token: str
    token_id: UUID


@dataclass(frozen=True)
class TenantEntry:
    """A tenant as the operator's listing shows it."""

    tenant_id: UUID
    name: str
    created_at: datetime


@dataclass(frozen=True)
class TokenEntry:
    """A token as its tenant's listing shows it: who holds it, with which role
    (never the secret, nor its digest)."""

    token_id: UUID
    principal_id: UUID
    principal_name: str
    role: str


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
    return IssuedToken(tenant.id, holder_id, name, role, token, token_id), row


def _checked_name(name: str) -> str:
    """Return ``name`` if it can name a tenant (:func:`checked_tenant_name`).

    Raises:
        InvalidTenantNameError: see :func:`checked_tenant_name`.
    """
    return checked_tenant_name(name, MAX_LABEL_CHARS)


def create_tenant(log: EventLog, name: str, admin_name: str = "admin") -> IssuedToken:
    """Create a tenant with an admin principal, and return the admin's token.

    Raises:
        ConflictError: another tenant has this name, or one that reads the same
            (:func:`tenant_name_key`); nothing was written.
        InvalidTenantNameError: the name is blank, too long, holds control,
            invisible or bidi characters or letters of two scripts, or reads as a
            UUID.
    """
    _checked_name(name)
    tenant_id = uuid4()
    tenant = Tenant.create(tenant_id, name, admin_name)
    issued, row = _issue(tenant, admin_name, "admin", issuer_id=tenant.founder_id)
    # The lock lasts until this transaction ends, after the tenant is recorded
    # (on another connection): the next creator's check sees it.
    with log.datastore.transaction(commit=False) as curs:
        curs.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK_KEY,))
        key = tenant_name_key(name)
        taken = [e.name for e in _entries(log, curs) if tenant_name_key(e.name) == key]
        if taken:
            msg = (
                f"a tenant named {taken[0]!r} exists already, and {name!r} reads the same "
                "(names compare without case, width or surrounding space); choose another"
            )
            raise ConflictError(msg)
        log.record([tenant], WriteContext(tenant_id=tenant_id, tokens=[row]))
    return issued


class _Directory:
    """This process's copy of tenant names (a tenant's name never changes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[UUID, TenantEntry] = {}


_directories: weakref.WeakKeyDictionary[EventLog, _Directory] = weakref.WeakKeyDictionary()


def _entries(log: EventLog, curs: Cursor[Any]) -> list[TenantEntry]:
    """Return every tenant, reading on ``curs`` the names not read before.

    The ids come from ``revision_tenants`` (every recorded tenant has a row,
    and the table has no row-level security); each name from the tenant's
    first event, read under that tenant's row-level security.
    """
    curs.execute(
        schema_sql("SELECT tenant_id FROM {schema}.revision_tenants", log.datastore.schema)
    )
    ids = [row["tenant_id"] for row in curs.fetchall()]
    directory = _directories.setdefault(log, _Directory())
    with directory.lock:
        for tenant_id in ids:
            if tenant_id in directory.entries:
                continue
            set_tenant(curs, tenant_id)
            curs.execute(
                schema_sql(
                    "SELECT originator_id, originator_version, topic, state"
                    " FROM {schema}.{events}"
                    " WHERE originator_id = %s AND originator_version = 1",
                    log.datastore.schema,
                ),
                (tenant_id,),
            )
            row = curs.fetchone()
            if row is None:
                continue
            created = log.mapper.to_domain_event(
                StoredEvent(
                    row["originator_id"],
                    row["originator_version"],
                    row["topic"],
                    bytes(row["state"]),
                )
            )
            if isinstance(created, Tenant.Created):
                directory.entries[tenant_id] = TenantEntry(
                    tenant_id, created.name, created.timestamp
                )
        set_tenant(curs, None)
        known = set(ids)
        return [entry for tenant_id, entry in directory.entries.items() if tenant_id in known]


def list_tenants(log: EventLog) -> list[TenantEntry]:
    """Return every tenant, by name."""
    with read_transaction(log.datastore) as curs:
        return sorted(_entries(log, curs), key=lambda entry: (entry.name, str(entry.tenant_id)))


def find_tenant(log: EventLog, reference: str) -> UUID:
    """Return the id of the tenant ``reference`` names: its id, or its name.

    Raises:
        NotFoundError: no tenant has that id or name.
    """
    try:
        tenant_id = UUID(reference)
    except ValueError:
        tenant_id = None
    with read_transaction(log.datastore) as curs:
        entries = _entries(log, curs)
    for entry in entries:
        if entry.tenant_id == tenant_id or (tenant_id is None and entry.name == reference):
            return entry.tenant_id
    msg = f"tenant {reference} not found" if tenant_id else f"no tenant is named {reference!r}"
    raise NotFoundError(msg)


def list_tokens(log: EventLog, tenant_id: UUID) -> list[TokenEntry]:
    """Return the tenant's tokens that still authenticate, by holder then id."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT token_id, principal_id, principal_name, role FROM {schema}.tokens"
                " ORDER BY principal_name, token_id",
                log.datastore.schema,
            )
        )
        return [
            TokenEntry(r["token_id"], r["principal_id"], r["principal_name"], r["role"])
            for r in cur.fetchall()
        ]


def revoke_token(log: EventLog, tenant_id: UUID, token_id: UUID) -> bool:
    """Revoke a token of a tenant: ``TokenRevoked`` and the removal of its lookup row,
    in one transaction, so it stops authenticating at once. Returns False (and
    writes nothing) when it was revoked already.

    Raises:
        NotFoundError: the tenant, or this token in it, does not exist.
    """
    with tenant_scope(tenant_id):
        tenant = load_aggregate(log, tenant_id, tenant_id, Tenant, "tenant")
        digest = tenant.revoke_token(token_id, principal_id=tenant.founder_id)
        if digest is None:
            return False
        log.record([tenant], WriteContext(tenant_id=tenant_id, revoked_tokens=[digest]))
    _verified.forget([digest])  # after commit: a lookup now finds no row
    return True


def issue_token(log: EventLog, tenant_id: UUID, principal_name: str, role: str) -> IssuedToken:
    """Issue a token to ``principal_name`` (registered if new) in a tenant.

    The command line acts as the operator who created the tenant, so its
    founding admin is recorded as the principal that caused the events.

    Raises:
        NotFoundError: the tenant does not exist.
        InvalidInputError: the role is unknown.
    """
    with tenant_scope(tenant_id):
        tenant = load_aggregate(log, tenant_id, tenant_id, Tenant, "tenant")
        issued, row = _issue(tenant, principal_name, role, issuer_id=tenant.founder_id)
        log.record([tenant], WriteContext(tenant_id=tenant_id, tokens=[row]))
    return issued


TOKEN_CACHE_S = 5.0
"""How long this process trusts a token it verified without asking the database
again: a token revoked (or a tenant deleted) by another process stops working
here within this bound; one revoked by this process stops at once."""


class _VerifiedTokens:
    """Tokens this process verified, by digest, with when each was verified.

    Revocation in this process forgets a digest (a tenant's deletion, all of the
    tenant's) and moves the generation on, so a lookup that began before it
    cannot put back what was forgotten.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.lock = threading.Lock()
        self.entries: dict[str, tuple[float, Caller]] = {}
        self.generation = 0
        self.max_entries = max_entries

    def get(self, digest: str, max_age_s: float) -> Caller | None:
        found = self.entries.get(digest)
        if found is None or time.monotonic() - found[0] > max_age_s:
            return None
        return found[1]

    def put(self, digest: str, caller: Caller, generation: int, verified_at: float) -> None:
        with self.lock:
            if generation != self.generation:
                return
            if len(self.entries) >= self.max_entries:
                self.entries.clear()  # bounded: start again rather than track ages
            self.entries[digest] = (verified_at, caller)

    def forget(self, digests: Iterable[str] = (), tenant_id: UUID | None = None) -> None:
        with self.lock:
            self.generation += 1
            for digest in digests:
                self.entries.pop(digest, None)
            if tenant_id is not None:
                for digest, (_, caller) in list(self.entries.items()):
                    if caller.tenant_id == tenant_id:
                        del self.entries[digest]


_verified = _VerifiedTokens()


def forget_tenant_tokens(tenant_id: UUID) -> None:
    """Stop trusting this process's verified tokens of a tenant (its deletion was
    recorded): the next request of each is checked against the database."""
    _verified.forget(tenant_id=tenant_id)


def verified_caller(token: str, *, max_age_s: float = TOKEN_CACHE_S) -> Caller | None:
    """Return the caller of a token this process verified less than ``max_age_s``
    seconds ago, without any I/O; None when :func:`authenticate` must ask."""
    return _verified.get(token_digest(token), max_age_s)


def authenticate(log: EventLog, token: str, *, max_age_s: float = TOKEN_CACHE_S) -> Caller:
    """Return the caller a bearer token stands for.

    A token verified by this process less than ``max_age_s`` seconds ago is
    trusted without a query (:data:`TOKEN_CACHE_S`); 0 always asks the database.

    Raises:
        AuthenticationError: the token is malformed or unknown.
    """
    match = _TOKEN_PATTERN.match(token)
    if match is None:
        msg = "the bearer token is malformed; expected pal_<tenant>_<secret>"
        raise AuthenticationError(msg)
    digest = token_digest(token)
    known = _verified.get(digest, max_age_s)
    if known is not None:
        return known
    generation, verified_at = _verified.generation, time.monotonic()
    caller = _look_up(log, UUID(hex=match.group(1)), digest)
    _verified.put(digest, caller, generation, verified_at)
    return caller


def _look_up(log: EventLog, tenant_id: UUID, digest: str) -> Caller:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT principal_id, principal_name, role,"
                " (SELECT decision_id FROM {schema}.tenant_deletions) AS closed_by"
                " FROM {schema}.tokens WHERE token_digest = %s",
                log.datastore.schema,
            ),
            (digest,),
        )
        row = cur.fetchone()
    if row is None:
        msg = "the bearer token is not valid"
        raise AuthenticationError(msg)
    return Caller(
        tenant_id, row["principal_id"], row["principal_name"], row["role"], row["closed_by"]
    )
