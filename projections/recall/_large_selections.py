"""Selections recall counted large, remembered for a few seconds so that it need not
count them again.

Whether the tenant and a recall's filters select more than ``EXACT_BELOW`` embedded
memories decides whether the vector search walks the index or searches exactly. The
bounded count is a round trip of its own (1.1 to 1.5 ms here, a tenth of the vector
search's time at 2,000 and at 100,000 memories) and its answer seldom changes: a
selection that was large a few seconds ago nearly always still is. A selection that
shrank meanwhile is still answered whole: the index walk comes back short and the
exact search takes over (:func:`palimpsest.projections.recall.search._nearest`), so a
remembered count costs at most a walk, never a memory. A selection counted small is
not remembered: it is counted again, because an exact search of one that grew is not
cheap.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

__all__ = ["LARGE_FOR_S", "LargeSelections"]

LARGE_FOR_S = 10.0
"""How long a selection counted large is taken as large without counting."""


class LargeSelections:
    """The selections (any hashable key: tenant, model and filters) counted large in
    the last ``seconds``, at most ``size`` of them (the least recently counted go
    first). Safe to share between threads."""

    def __init__(
        self,
        seconds: float = LARGE_FOR_S,
        size: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.size = size
        self._clock = clock
        self._counted: OrderedDict[Hashable, float] = OrderedDict()
        self._lock = threading.Lock()

    def large(self, key: Hashable) -> bool:
        """Whether ``key`` was counted large less than ``seconds`` ago."""
        with self._lock:
            at = self._counted.get(key)
            if at is None:
                return False
            if self._clock() - at >= self.seconds:
                del self._counted[key]
                return False
            return True

    def counted(self, key: Hashable, large: bool) -> None:
        """Record that ``key`` was just counted, ``large`` or not (a small count
        forgets an earlier large one)."""
        with self._lock:
            self._counted.pop(key, None)
            if large:
                self._counted[key] = self._clock()
                while len(self._counted) > self.size:
                    self._counted.popitem(last=False)
