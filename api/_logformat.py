"""Structured logs: one JSON object per line."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "configure_logging"]

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_DROPPED = {"color_message"}
"""Extras left out: uvicorn's ``color_message`` repeats the message with ANSI colours."""


class JsonFormatter(logging.Formatter):
    """Format a record as JSON with its ``extra`` fields as top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as one line of JSON."""
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        line.update(
            {k: v for k, v in vars(record).items() if k not in _STANDARD and k not in _DROPPED}
        )
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class _StderrHandler(logging.StreamHandler[Any]):
    """Write to whatever ``sys.stderr`` is now (tests swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(level: str) -> None:
    """Send every log record to stderr as JSON lines at ``level``."""
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # pgserver logs every pg_ctl command line at INFO.
    logging.getLogger("pgserver").setLevel(max(logging.WARNING, root.level))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = name != "uvicorn.access"
