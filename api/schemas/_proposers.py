"""``/v1/proposers``: withdraw the support a proposer or a model contributed."""

from __future__ import annotations

from palimpsest.api.schemas._common import Label, Reason, RequestBody

__all__ = ["WithdrawCreate"]


class WithdrawCreate(RequestBody):
    """Withdraw a proposer's contributions (only those made with ``model``, if given)."""

    model: Label | None = None
    reason: Reason | None = None
