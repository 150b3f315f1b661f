"""Logged text made servable: lone surrogates escaped on the way out.

The log keeps every string a caller ever sent as it was sent, and PostgreSQL
(``bytea`` state) stores lone surrogates (U+D800 to U+DFFF with no pair) that
no UTF-8 encoder will write: a response that held one failed to serialise.
What serves logged text (history, the feed, export, MCP ``history``) escapes
each lone surrogate as the six ASCII characters ``\\uXXXX`` (lowercase hex, the
way JSON would write it): a caller reads ``"ok\\\\udcffx"`` in JSON, the text
``ok\\udcffx``. A paired surrogate cannot occur in a Python string, so no
valid text is changed. A backslash already in the text is not escaped: the
escaping is for reading, not a reversible encoding (the log keeps the
original, which export's consumers get escaped the same way).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["escape_surrogates", "escaped"]

_LONE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_surrogates(text: str) -> str:
    """Return ``text`` with each lone surrogate written as ``\\uXXXX``."""
    return _LONE.sub(_escape, text) if _LONE.search(text) else text


def escaped(value: Any) -> Any:
    """Return ``value`` (plain JSON-like data) with :func:`escape_surrogates` applied to
    every string in it, keys too; anything else as it is."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, dict):
        return {escaped(k): escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped(v) for v in value]
    return value
