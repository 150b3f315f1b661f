"""Reading Server-Sent Events, one line at a time (the WHATWG event-stream format)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ServerSentEvent", "SseParser"]


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched message: its ``id``, ``event`` type and ``data``."""

    data: str
    event: str = "message"
    id: str | None = None


@dataclass
class SseParser:
    """Feed it the stream's lines; it returns a message at each blank line that ends one.

    Comment lines (``:`` first, the server's keep-alives) and messages without data
    return nothing."""

    _data: list[str] = field(default_factory=list)
    _event: str = ""
    _id: str | None = None

    def feed(self, line: str) -> ServerSentEvent | None:
        """Read one line (without its line break)."""
        if not line:
            message = None
            if self._data:
                message = ServerSentEvent("\n".join(self._data), self._event or "message", self._id)
            self._data, self._event = [], ""
            return message
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._id = value
        return None
