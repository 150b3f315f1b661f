"""The event log, the payload store, migrations, and the read and write paths."""

from __future__ import annotations

__all__: list[str] = []
