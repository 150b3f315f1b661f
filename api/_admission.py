"""Caps on what a token and a tenant may hold open at once: event streams and waits.

An open ``/v1/events/stream`` and a read waiting for the drains hold no
thread, but each holds a socket (a file descriptor), a task and a
subscription, and costs a query whenever its tenant is woken. Without a cap,
one token could open enough of them to exhaust the process's file
descriptors and fill the worker threads with its rechecks, and every tenant
would wait. :class:`Admission` counts what each token and each tenant holds
in this process; a request beyond either cap is refused with 429
``concurrency-limit`` and ``Retry-After`` before it holds anything.

The counts are per process: several ``serve`` processes behind a proxy each
allow the caps, and the proxy caps the whole (docs/security.md).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from fastapi import Depends, Request

from palimpsest.api._deps import CallerDep
from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.commands.tokens import token_digest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

__all__ = [
    "Admission",
    "Caps",
    "ConcurrencyLimitError",
    "Holder",
    "HolderDep",
    "KINDS",
    "Kind",
    "OVER_CAP",
    "SCOPES",
    "Scope",
    "Slot",
    "get_holder",
]

Kind = Literal["stream", "wait"]
Scope = Literal["token", "tenant"]
KINDS: tuple[Kind, ...] = ("stream", "wait")
SCOPES: tuple[Scope, ...] = ("token", "tenant")

_RETRY_AFTER_S: dict[Kind, int] = {"stream": 5, "wait": 1}
"""A wait lasts at most 30 s, most far less; a stream may stay open for hours,
so a refused one retries less eagerly."""


class ConcurrencyLimitError(PalimpsestError):
    """Raised when a token or its tenant already holds as many open streams, or as
    many waits, as this process allows (429, with ``Retry-After``)."""

    def __init__(self, message: str, kind: Kind, scope: Scope) -> None:
        super().__init__(message)
        self.kind = kind
        self.scope = scope
        self.retry_after_s = _RETRY_AFTER_S[kind]


@dataclass(frozen=True)
class Caps:
    """How many streams and waits one token, and one tenant, may hold at once."""

    streams_per_token: int
    streams_per_tenant: int
    waits_per_token: int
    waits_per_tenant: int

    def of(self, kind: Kind) -> dict[Scope, int]:
        """Return the caps on ``kind`` by scope."""
        if kind == "stream":
            return {"token": self.streams_per_token, "tenant": self.streams_per_tenant}
        return {"token": self.waits_per_token, "tenant": self.waits_per_tenant}


class Admission:
    """What every token and tenant holds open in this process, within :class:`Caps`.

    Thread-safe: slots are taken on the event loop, but a count is cheap to
    guard and the metrics read it from the scraping thread.
    """

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self._lock = threading.Lock()
        self._held: Counter[tuple[Kind, Scope, UUID | str]] = Counter()
        self._open: Counter[Kind] = Counter()
        self._refused: Counter[tuple[Kind, Scope]] = Counter()

    def hold(self, kind: Kind, tenant_id: UUID, token: str) -> Slot:
        """Take a slot of ``kind`` for ``token`` of ``tenant_id``; release it with
        :meth:`Slot.release` (or use the slot as a context manager).

        Raises:
            ConcurrencyLimitError: the token or the tenant holds its cap already.
        """
        caps = self.caps.of(kind)
        keys: dict[Scope, tuple[Kind, Scope, UUID | str]] = {
            "token": (kind, "token", token),
            "tenant": (kind, "tenant", tenant_id),
        }
        with self._lock:
            for scope in SCOPES:  # the token first: its own cap is the one it can act on
                if self._held[keys[scope]] >= caps[scope]:
                    self._refused[kind, scope] += 1
                    noun = "open event streams" if kind == "stream" else "waiting requests"
                    holder = "this token" if scope == "token" else f"tenant {tenant_id}"
                    msg = (
                        f"{holder} already has {caps[scope]} {noun}, the most allowed at once; "
                        "close one, or retry later"
                    )
                    raise ConcurrencyLimitError(msg, kind, scope)
            for key in keys.values():
                self._held[key] += 1
            self._open[kind] += 1

        def release() -> None:
            with self._lock:
                for key in keys.values():
                    self._held[key] -= 1
                    if self._held[key] <= 0:
                        del self._held[key]  # no entry left per token that once held one
                self._open[kind] -= 1

        return Slot(release)

    def open(self) -> dict[Kind, int]:
        """Return how many streams and waits are open now, by kind."""
        with self._lock:
            return {kind: self._open[kind] for kind in KINDS}

    def refused(self) -> dict[tuple[Kind, Scope], int]:
        """Return how many requests were refused so far, by kind and by the cap hit."""
        with self._lock:
            return {(kind, scope): self._refused[kind, scope] for kind in KINDS for scope in SCOPES}


class Slot:
    """A stream or a wait held open; :meth:`release` it exactly once (more is harmless)."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> Slot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


async def _connected() -> bool:
    return False


@dataclass(frozen=True)
class Holder:
    """An authenticated caller as the caps count it: its tenant and its token, and
    whether its client is still there (a wait it left need not hold a slot)."""

    admission: Admission
    tenant_id: UUID
    token: str
    """The token's digest, as stored: never the secret itself."""
    disconnected: Callable[[], Awaitable[bool]] = _connected
    """Whether the client has gone away (without waiting for it to)."""

    def hold(self, kind: Kind) -> Slot:
        """Take a slot of ``kind`` (see :meth:`Admission.hold`).

        Raises:
            ConcurrencyLimitError: the token or the tenant holds its cap already.
        """
        return self.admission.hold(kind, self.tenant_id, self.token)


async def get_holder(request: Request, caller: CallerDep) -> Holder:
    """Return the authenticated caller as the caps count it (its tenant and token)."""
    # The caller is authenticated, so there is one header and it holds a bearer token.
    _, _, token = request.headers["authorization"].partition(" ")
    admission: Admission = request.app.state.admission
    return Holder(admission, caller.tenant_id, token_digest(token.strip()), request.is_disconnected)


HolderDep = Annotated[Holder, Depends(get_holder)]


OVER_CAP: dict[int | str, dict[str, Any]] = {
    429: {
        "description": "Too many at once (RFC 9457 problem `concurrency-limit`): the token or "
        "its tenant holds as many open streams, or as many waits, as allowed. `Retry-After` "
        "says when to try again.",
        "headers": {
            "Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}
        },
        "content": {"application/problem+json": {}},
    }
}
"""The documented answer of a route that takes a slot (its ``responses=``)."""
