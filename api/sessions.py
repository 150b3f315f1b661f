"""Browser sessions of the review page: signing in with a token, and CSRF tokens.

The review page (``/review``) shares the API's origin, and the API itself
takes only bearer tokens, so a cookie never authenticates a ``/v1`` request.
A person signs in by pasting a token; the page then needs to remember who
they are between requests without handing the token back to the browser:

- The session cookie holds 256 random bits and nothing else. This process
  keeps, under the cookie's SHA-256 digest, the token, a CSRF token, and
  when the session started and was last used. A cookie therefore carries no
  secret a script, a log or a proxy could replay against the API, and the
  table of sessions holds no value a browser could present.
- Every request authenticates the kept token again through the API's own
  lookup (:func:`palimpsest.projections.commands.tokens.authenticate`), so revoking a
  token ends its sessions at once, and a role is never cached.
- Sessions end after :data:`IDLE_S` without use or :data:`LIFETIME_S` in
  all, at sign-out, or when the process restarts; at most :data:`CAPACITY`
  live in a process (the oldest is dropped first). They live in one
  process: a deployment of several processes behind one name needs sticky
  sessions for the page, or a person signs in again.
- Every form carries the session's CSRF token in a hidden field, checked on
  every POST in constant time, and a request a browser marks as coming from
  another site (``Sec-Fetch-Site``) is refused before that. SameSite=Strict
  alone would leave a sibling subdomain free to post. The sign-in form,
  before any session exists, uses a double-submit nonce: a short-lived
  cookie and the same value in the form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

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
"""Sessions one process keeps; starting one more drops the oldest."""


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
    """The bearer token, kept in this process only; authenticated again on every request."""
    csrf: str
    started: float
    seen: float


class Sessions:
    """This process's review-page sessions, keyed by the digest of their cookie."""

    def __init__(
        self,
        *,
        idle_s: float = IDLE_S,
        lifetime_s: float = LIFETIME_S,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._idle_s = idle_s
        self._lifetime_s = lifetime_s
        self._capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    @staticmethod
    def _key(cookie: str) -> str:
        return hashlib.sha256(cookie.encode()).hexdigest()

    def start(self, token: str) -> tuple[str, Session]:
        """Start a session for a token that has just authenticated; return the
        cookie value (always a new one: a session id is never carried over from
        before sign-in) and the session."""
        cookie = new_nonce()
        now = self._clock()
        session = Session(token=token, csrf=new_nonce(), started=now, seen=now)
        with self._lock:
            self._sweep(now)
            while len(self._sessions) >= self._capacity:
                del self._sessions[next(iter(self._sessions))]
            self._sessions[self._key(cookie)] = session
        return cookie, session

    def get(self, cookie: str | None) -> Session | None:
        """Return the live session a cookie names (and mark it used), or None."""
        if not cookie:
            return None
        now = self._clock()
        key = self._key(cookie)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if self._ended(session, now):
                del self._sessions[key]
                return None
            session.seen = now
            return session

    def end(self, cookie: str | None) -> None:
        """End the session a cookie names, if any."""
        if cookie:
            with self._lock:
                self._sessions.pop(self._key(cookie), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _ended(self, session: Session, now: float) -> bool:
        return now - session.seen > self._idle_s or now - session.started > self._lifetime_s

    def _sweep(self, now: float) -> None:
        """Drop ended sessions (called on start, so the table never holds more
        than the sessions started within a lifetime)."""
        for key in [k for k, s in self._sessions.items() if self._ended(s, now)]:
            del self._sessions[key]
