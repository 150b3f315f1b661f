"""Browser sessions of the review page: signing in with a token, and CSRF tokens.

The review page (``/review``) shares the API's origin, and the API itself
takes only bearer tokens, so a cookie never authenticates a ``/v1`` request.
A person signs in by pasting a token; the page then needs to remember who
they are between requests without handing the token back to the browser:

- The session cookie holds the tenant's id and 256 random bits, nothing else.
  The database keeps (:mod:`palimpsest.projections.commands.review_sessions`),
  under the SHA-256 digest of those bits and the tenant's row-level security,
  the token sealed under the same bits (XORed with a SHAKE-256 stream of them:
  one use per key, so a one-time pad), and when the session started and was
  last used; the CSRF token is derived from the bits, never stored. A cookie
  therefore carries no secret a script, a log or a proxy could replay against
  the API, and the table of sessions holds no value a browser could present,
  nor a token: the row opens nothing without the cookie.
- Every request authenticates the unsealed token again through the API's own
  lookup (:func:`palimpsest.projections.commands.tokens.authenticate`), so revoking a
  token ends its sessions at once, and a role is never cached.
- Sessions end after :data:`IDLE_S` without use or :data:`LIFETIME_S` in
  all, or at sign-out; at most :data:`CAPACITY` live per tenant (the oldest is
  dropped first). Every process of a deployment (``serve --workers N``, several
  hosts on one database) sees every session, and a restart ends none.
- Every form carries the session's CSRF token in a hidden field, checked on
  every POST in constant time, and a request a browser marks as coming from
  another site (``Sec-Fetch-Site``) is refused before that. SameSite=Strict
  alone would leave a sibling subdomain free to post. The sign-in form,
  before any session exists, uses a double-submit nonce: a short-lived
  cookie and the same value in the form.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.projections.commands.review_sessions import (
    StoredSession,
    end_session,
    start_session,
    use_session,
)

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "CAPACITY",
    "COOKIE",
    "IDLE_S",
    "LIFETIME_S",
    "SIGN_IN_COOKIE",
    "SIGN_IN_S",
    "Session",
    "Sessions",
    "new_nonce",
    "same_origin",
    "tokens_match",
]

COOKIE = "palimpsest_review"
"""The session cookie's name (HttpOnly, SameSite=Strict, path ``/review``)."""
SIGN_IN_COOKIE = "palimpsest_review_sign_in"
"""The sign-in form's double-submit nonce cookie."""
IDLE_S = 30 * 60
"""A session unused this long (seconds) has ended."""
LIFETIME_S = 12 * 60 * 60
"""A session this old (seconds) has ended, however busy."""
SIGN_IN_S = 60 * 60
"""How long (seconds) a sign-in form's nonce stays valid."""
CAPACITY = 10_000
"""Sessions a tenant keeps; starting one more drops its oldest."""

_COOKIE_PATTERN = re.compile(r"^([0-9a-f]{32})\.([A-Za-z0-9_-]{43})$")
_SEAL = b"palimpsest review session token\0"


def new_nonce() -> str:
    """Return 256 random bits, URL-safe: a cookie value or a CSRF token."""
    return secrets.token_urlsafe(32)


def tokens_match(expected: str, given: str | None) -> bool:
    """Return whether a submitted CSRF token (or nonce) is the expected one, in
    constant time; a missing or empty one never matches."""
    if not given or not expected:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def same_origin(headers: Mapping[str, str]) -> bool:
    """Return False for a request the browser marks as sent by another site.

    ``Sec-Fetch-Site`` is set by the browser and cannot be forged by a page:
    ``cross-site`` and ``same-site`` (a sibling subdomain) are refused;
    ``same-origin`` and ``none`` (the person's own action: a typed address, a
    bookmark) pass, and so does its absence (a client that is not a browser,
    which holds no cookie of a victim's to abuse).
    """
    site = headers.get("sec-fetch-site")
    return site is None or site in {"same-origin", "none"}


@dataclass
class Session:
    """One signed-in browser: the token it signed in with, and its CSRF token."""

    token: str
    """The bearer token, unsealed for this request; authenticated again on every request."""
    csrf: str
    started: float
    """When the session began, in seconds of the sessions' clock."""


def _sealed(secret: str, data: bytes) -> bytes:
    """Return ``data`` XORed with a stream only ``secret`` gives (sealing and unsealing
    are the same operation)."""
    stream = hashlib.shake_256(_SEAL + secret.encode()).digest(len(data))
    return bytes(a ^ b for a, b in zip(data, stream, strict=True))


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def _csrf(secret: str) -> str:
    """Return the session's CSRF token: its own function of the cookie's secret, which
    no page of another origin can read, and which reveals nothing of it."""
    keyed = hmac.new(secret.encode(), b"palimpsest review csrf", hashlib.sha256)
    return base64.urlsafe_b64encode(keyed.digest()).decode().rstrip("=")


class Sessions:
    """The review page's sessions, in the database every process of a deployment
    shares; the cookie names its tenant, and the digest of its secret the row."""

    def __init__(
        self,
        *,
        idle_s: float = IDLE_S,
        lifetime_s: float = LIFETIME_S,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._idle = timedelta(seconds=idle_s)
        self._lifetime = timedelta(seconds=lifetime_s)
        self._capacity = capacity
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def start(self, log: EventLog, tenant_id: UUID, token: str) -> tuple[str, Session]:
        """Start a session for a token of ``tenant_id`` that has just authenticated;
        return the cookie value (always a new one: a session id is never carried
        over from before sign-in) and the session."""
        secret = new_nonce()
        now = self._now()
        stored = StoredSession(_sealed(secret, token.encode()), now)
        start_session(
            log,
            tenant_id,
            _digest(secret),
            stored,
            now=now,
            idle=self._idle,
            lifetime=self._lifetime,
            capacity=self._capacity,
        )
        return f"{tenant_id.hex}.{secret}", Session(token, _csrf(secret), now.timestamp())

    def get(self, log: EventLog, cookie: str | None) -> Session | None:
        """Return the live session a cookie names (and mark it used), or None."""
        found = _COOKIE_PATTERN.match(cookie or "")
        if found is None:
            return None
        tenant_id, secret = UUID(hex=found.group(1)), found.group(2)
        stored = use_session(
            log,
            tenant_id,
            _digest(secret),
            now=self._now(),
            idle=self._idle,
            lifetime=self._lifetime,
        )
        if stored is None:
            return None
        try:
            token = _sealed(secret, stored.sealed_token).decode("ascii")
        except UnicodeDecodeError:  # not sealed under this secret: never a session
            return None
        return Session(token, _csrf(secret), stored.started_at.timestamp())

    def end(self, log: EventLog, cookie: str | None) -> None:
        """End the session a cookie names, if any."""
        found = _COOKIE_PATTERN.match(cookie or "")
        if found is not None:
            end_session(log, UUID(hex=found.group(1)), _digest(found.group(2)))
