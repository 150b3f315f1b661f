"""Field types every resource's request bodies share, and their base."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from domain.limits import MAX_LABEL_CHARS, MAX_REASON_CHARS

__all__ = [
    "BatchRef",
    "Label",
    "MediaType",
    "Reason",
    "RequestBody",
]

# No control characters: labels end up in logs, filters and exports.
Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_LABEL_CHARS, pattern=r"^[^\x00-\x1f\x7f]+$"),
]
MediaType = Annotated[
    str,
    StringConstraints(
        max_length=MAX_LABEL_CHARS,
        pattern=r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$",
    ),
]
Reason = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=MAX_REASON_CHARS, pattern=r"^[^\x00-\x09\x0b-\x1f\x7f]*\S"
    ),
]
"""Why an operator decided something: free text, no control characters but newlines."""
BatchRef = Annotated[str, StringConstraints(pattern=r"^\$[0-9]{1,4}$")]
"""``"$N"``: inside a batch, the id produced by item N (counting from 0)."""


class RequestBody(BaseModel):
    """The base of request bodies: immutable, and unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)
