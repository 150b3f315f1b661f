"""Events, aggregates and pure policies. No I/O, no framework imports."""

from __future__ import annotations

__all__: list[str] = []
