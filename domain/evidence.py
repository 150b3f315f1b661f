"""Evidence excerpts: exact spans of an observation that a version cites."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from palimpsest.domain.digest import content_digest
from palimpsest.domain.errors import EvidenceOutOfRangeError

__all__ = ["Excerpt", "cut_excerpt"]


@dataclass(frozen=True)
class Excerpt:
    """A span ``[start, end)`` of an observation's text, in Unicode code points."""

    observation_id: UUID
    start: int
    end: int
    excerpt_digest: str

    def as_event_value(self) -> dict[str, str | int]:
        """Return the plain mapping stored in events (no content, only its digest)."""
        return {
            "observation_id": str(self.observation_id),
            "start": self.start,
            "end": self.end,
            "excerpt_digest": self.excerpt_digest,
        }

    @classmethod
    def from_event_value(cls, value: dict[str, str | int]) -> Excerpt:
        """Return the excerpt stored in an event by :meth:`as_event_value`."""
        return cls(
            observation_id=UUID(str(value["observation_id"])),
            start=int(value["start"]),
            end=int(value["end"]),
            excerpt_digest=str(value["excerpt_digest"]),
        )


def cut_excerpt(observation_id: UUID, content: str, start: int, end: int) -> Excerpt:
    """Return the excerpt ``content[start:end]`` after checking the offsets.

    Raises:
        EvidenceOutOfRangeError: unless ``0 <= start < end <= len(content)``.
    """
    if not 0 <= start < end <= len(content):
        msg = (
            f"evidence [{start}, {end}) is outside observation {observation_id}, "
            f"whose content has {len(content)} characters; "
            "offsets are Unicode code points with 0 <= start < end <= length"
        )
        raise EvidenceOutOfRangeError(msg)
    text = content[start:end]
    return Excerpt(observation_id, start, end, content_digest(text.encode("utf-8")))
