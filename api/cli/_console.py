"""What commands write: results on stdout, one JSON document a line; progress on stderr."""

from __future__ import annotations

import json
import sys

__all__ = ["print_json", "report"]


def print_json(value: object) -> None:
    """Print ``value`` on stdout as one line of JSON."""
    print(json.dumps(value))


def report(line: str) -> None:
    """Print a progress or status line on stderr, flushed so a long run shows it live."""
    print(line, file=sys.stderr, flush=True)
