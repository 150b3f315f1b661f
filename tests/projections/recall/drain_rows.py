"""The indexing drain's rows for memories written straight into the text index by
tests (the attributes the search reads)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4


def drain_rows(ids: list[UUID]) -> list[dict[str, Any]]:
    """Return the indexing drain's rows for memories ``ids``: current facts of scope
    ``user``, each with a version and digest of its own."""
    return [
        {
            "memory_id": memory_id,
            "current_version_id": uuid4(),
            "content_digest": f"d{memory_id}",
            "requested": 1,
            "memory_type": "fact",
            "scope": "user",
            "project": None,
        }
        for memory_id in ids
    ]
