"""Transactions PostgreSQL rolled back to break a deadlock or a serialization
conflict: recognised, and tried again at once.

Such a transaction wrote nothing, and the conflict that ended it is usually
over by the time it is retried; waiting (a drain's backoff grows from a second
to minutes) would only keep readers ``pending`` that long.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import psycopg

__all__ = [
    "ROLLBACK_ATTEMPTS",
    "retry_rolled_back",
    "rolled_back",
]

ROLLBACK_ATTEMPTS = 3
"""Tries of one piece of work whose transactions PostgreSQL keeps rolling back."""

_T = TypeVar("_T")
_log = logging.getLogger(__name__)


def rolled_back(error: BaseException) -> str | None:
    """Return the SQLSTATE if ``error``, or an error it was raised from, is a
    transaction PostgreSQL rolled back (class 40: ``40P01`` deadlock detected,
    ``40001`` serialization failure); else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg.Error) and (current.sqlstate or "").startswith("40"):
            return current.sqlstate
        current = current.__cause__ or current.__context__
    return None


def retry_rolled_back(
    work: Callable[[], _T], what: str, *, attempts: int = ROLLBACK_ATTEMPTS
) -> _T:
    """Run ``work`` (which must be safe to repeat: its transaction wrote nothing
    when it was rolled back); run it again at once, up to ``attempts`` in all,
    while PostgreSQL rolls its transaction back. Each retry is one structured
    log line naming ``what``.

    Raises:
        Whatever ``work`` raises otherwise, or on its last attempt.
    """
    for attempt in range(1, attempts):
        try:
            return work()
        except Exception as error:
            sqlstate = rolled_back(error)
            if sqlstate is None:
                raise
            _log.warning(
                "transaction rolled back by the database, retrying",
                extra={"work": what, "sqlstate": sqlstate, "attempt": attempt},
            )
    return work()
