"""The judge interface: items in, one verdict (or one item's failure) out per item.

Every kind of judge the pass can be configured with (an OpenAI-compatible
endpoint, recorded responses) answers through :class:`Judge`. A malformed
answer for one item is that item's :class:`ItemFailure`; only a judge that
cannot be reached (after its retries) fails a whole call, with
:class:`JudgeUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from palimpsest.domain.errors import PalimpsestError

if TYPE_CHECKING:
    from datetime import datetime

    from palimpsest.domain.judge_state import JudgeItem
    from palimpsest.domain.verdicts import Verdict

__all__ = [
    "ItemFailure",
    "Judge",
    "JudgeUnavailableError",
    "JudgeUsage",
]


class JudgeUnavailableError(PalimpsestError):
    """Raised when the judge's endpoint cannot be reached, refuses a request, or keeps
    failing after its retries."""


@dataclass(frozen=True)
class ItemFailure:
    """One item the judge gave no usable answer for; the rest of its batch stands."""

    ref: str
    error: str
    """What was wrong with the answer (missing, not a choice, naming no neighbour)."""


@dataclass(frozen=True)
class JudgeUsage:
    """What a judge call cost, as the server reported it (zero when it reported nothing)."""

    calls: int = 0
    """Requests sent and answered (one per batch; retries not counted)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        """Return the usage of both."""
        return JudgeUsage(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


class Judge(Protocol):
    """A judge of the forgetting pass's items."""

    @property
    def model(self) -> str:
        """The model asked for (pinned by configuration)."""
        ...

    @property
    def usage(self) -> JudgeUsage:
        """What the last :meth:`judge` call cost, batch by batch as it went: after a
        :class:`JudgeUnavailableError`, what the batches before the failure cost."""
        ...

    def batches(self, now: datetime, items: Sequence[JudgeItem]) -> list[list[JudgeItem]]:
        """Return the batches :meth:`judge` would send, each one request: a caller that
        meters every send calls :meth:`judge` once per batch returned here."""
        ...

    def judge(self, now: datetime, items: Sequence[JudgeItem]) -> list[Verdict | ItemFailure]:
        """Return one result per item, in the items' order.

        An item whose answer is missing or malformed gets an :class:`ItemFailure`;
        the other items of its batch keep their verdicts.

        Raises:
            JudgeUnavailableError: a request failed after its retries (the items
                of that batch and later ones get no result).
            InvalidInputError: the items cannot be rendered (see
                :func:`palimpsest.domain.judge_state.render_state`).
        """
        ...
