"""Field types every resource's request bodies and parameters share, and their base.

Every text a request carries that reaches PostgreSQL as ``text`` or ``jsonb``
(labels, reasons, cursors, query and path parameters) is one of the types
built here on the pattern :func:`pg_text` returns, which always refuses U+0000: PostgreSQL stores
no NUL in ``text`` and refuses ``\\u0000`` in ``jsonb``, so a NUL accepted
here would fail later, in a drain or a rebuild, instead of at the edge.
Content (observations and memory versions) is the exception: it is stored as
bytes (``bytea``) and may hold any character.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from palimpsest.domain.limits import MAX_LABEL_CHARS, MAX_REASON_CHARS

__all__ = [
    "BatchRef",
    "CONTROLS",
    "CONTROLS_BUT_NEWLINE",
    "Cursor",
    "JsonInt",
    "JsonPositiveInt",
    "JsonScheduleMinutes",
    "Label",
    "MAX_POSITION",
    "MediaType",
    "NOT_BLANK",
    "PgText",
    "QueryFlag",
    "Reason",
    "RequestBody",
    "Rfc3339",
    "pg_text",
]


def pg_text(*, forbid: str = "", non_blank: bool = False) -> str:
    """Return the pattern of text that PostgreSQL ``text`` and ``jsonb`` can store.

    ``forbid`` is a regex character-class body of characters refused besides
    U+0000 (always refused). ``non_blank`` also requires one character that is
    neither whitespace nor forbidden (the domain's "blank" is ``str.strip()``,
    which strips U+001C-U+001F too). The pattern is anchored at both ends and
    published in the OpenAPI document, so a client sees the rule it is held to.
    """
    allowed = f"[^\\x00{forbid}]"
    if non_blank:
        return f"^{allowed}*[^\\s\\x00\\x1c-\\x1f{forbid}]{allowed}*$"
    return f"^{allowed}*$"


MAX_POSITION = 2**63 - 1
"""The largest log position (PostgreSQL ``bigint``): the bound of position parameters."""

NOT_BLANK = r"[^\s\x1c-\x1f]"
"""Content that is not blank: one character ``str.strip()`` keeps (unanchored)."""

CONTROLS = r"\x01-\x1f\x7f"
CONTROLS_BUT_NEWLINE = r"\x01-\x09\x0b-\x1f\x7f"

PgText = Annotated[str, StringConstraints(pattern=pg_text())]
"""Free text without U+0000 (a recall query): the base every text type refines."""

# No control characters: labels end up in logs, filters and exports.
Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_LABEL_CHARS, pattern=pg_text(forbid=CONTROLS)),
]
"""A scope, project, topic, source, model id or principal: no control characters."""

Reason = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=MAX_REASON_CHARS,
        pattern=pg_text(forbid=CONTROLS_BUT_NEWLINE, non_blank=True),
    ),
]
"""Why an operator decided something: free text, not blank, no control characters
but newlines."""

Cursor = Annotated[str, StringConstraints(max_length=200, pattern=r"^[A-Za-z0-9_-]+$")]
"""An opaque page cursor (base64url, as a listing hands it out)."""

MediaType = Annotated[
    str,
    StringConstraints(
        max_length=MAX_LABEL_CHARS,
        pattern=r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$",
    ),
]
BatchRef = Annotated[str, StringConstraints(pattern=r"^\$[0-9]{1,4}$")]
"""``"$N"``: inside a batch, the id produced by item N (counting from 0)."""

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _rfc3339_text(value: object) -> object:
    """Refuse anything but an RFC 3339 date-time string (pydantic would also read
    a number, or a numeric string, as a Unix time)."""
    if isinstance(value, str) and not _RFC3339.fullmatch(value):
        msg = "expected an RFC 3339 date-time with an offset, e.g. 2026-01-31T12:00:00Z"
        raise ValueError(msg)
    if not isinstance(value, str):
        msg = "expected an RFC 3339 date-time string"
        raise ValueError(msg)
    return value


Rfc3339 = Annotated[AwareDatetime, BeforeValidator(_rfc3339_text)]
"""A time, as the OpenAPI document publishes ``date-time``: RFC 3339 with an offset."""


def _json_integer(value: object) -> object:
    """Refuse a boolean or a string where JSON has an integer (pydantic would read
    ``true`` as 1 and ``"5"`` as 5); an integral number such as ``18.0`` is one."""
    if isinstance(value, bool | str):
        msg = "expected a JSON integer"
        raise ValueError(msg)
    return value


JsonInt = Annotated[int, BeforeValidator(_json_integer)]
"""A request body's integer: a JSON number with no fraction (``18`` or ``18.0``)."""

JsonPositiveInt = Annotated[int, Field(ge=1), BeforeValidator(_json_integer)]
"""A :data:`JsonInt` of at least 1 (its bound stays published inside ``X | None``)."""

JsonScheduleMinutes = Annotated[int, Field(ge=1, le=10_080), BeforeValidator(_json_integer)]
"""A :data:`JsonInt` of minutes between two scheduled runs: 1 to a week (its bounds
stay published inside ``X | None``)."""


def _true_or_false(value: object) -> object:
    """Accept ``true`` or ``false`` only (pydantic would also read 0, 1, yes, on...)."""
    if value in ("true", "false", True, False):
        return value in ("true", True)
    msg = "expected true or false"
    raise ValueError(msg)


QueryFlag = Annotated[bool, BeforeValidator(_true_or_false)]
"""A boolean query parameter: ``true`` or ``false``, as the OpenAPI document says."""


class RequestBody(BaseModel):
    """The base of request bodies: immutable, and unknown fields are refused.

    Its bool and float fields are declared strict one by one, its integers
    :data:`JsonInt` (a model-wide strict config would refuse UUID and date-time
    strings, as FastAPI validates in Python mode, and ``18.0``, which JSON Schema
    counts as an integer): a JSON ``0`` is not ``false``, nor ``"5"`` a number."""

    model_config = ConfigDict(extra="forbid", frozen=True)
