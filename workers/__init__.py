"""Dramatiq drain workers for distributed deployments (``dramatiq workers.boot``)."""

from __future__ import annotations

__all__: list[str] = []
