"""The base of every read's answer: an immutable pydantic model, declared once.

Reads return these models; the HTTP schemas in ``api/schemas/`` derive from
them (or use them as they are), so a shape is written down in one place.
Field names are the ones the code uses; where the JSON has another name for
the same thing (a memory's ``memory_type`` is ``type`` on the wire), the
model says so with a serialization alias.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Record"]


class Record(BaseModel):
    """A read's answer: immutable, and strict about its fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")
