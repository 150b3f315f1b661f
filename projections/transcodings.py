"""How snapshot state that is not plain JSON is stored.

A memory's snapshot is its aggregate state: lists of frozen dataclasses
(versions with their excerpts, contributions) and an archival. Events never
need these: their fields are plain values.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

from eventsourcing.persistence import Transcoding

from domain.belief import ArchiveFact, ContributionFact
from domain.evidence import Excerpt
from domain.memory import VersionRecord

__all__ = ["SNAPSHOT_TRANSCODINGS"]


class _DataclassAsDict(Transcoding):
    """A frozen dataclass as the mapping of its fields (nested values transcoded)."""

    tuples: ClassVar[tuple[str, ...]] = ()
    """Fields that are tuples (JSON gives lists back)."""

    def encode(self, obj: Any) -> dict[str, Any]:
        return {f.name: getattr(obj, f.name) for f in fields(obj)}

    def decode(self, data: dict[str, Any]) -> Any:
        values = {k: tuple(v) if k in self.tuples else v for k, v in data.items()}
        return self.type(**values)


class _ExcerptAsDict(_DataclassAsDict):
    type = Excerpt
    name = "palimpsest_excerpt"


class _VersionRecordAsDict(_DataclassAsDict):
    type = VersionRecord
    name = "palimpsest_version"
    tuples = ("excerpts",)


class _ContributionAsDict(_DataclassAsDict):
    type = ContributionFact
    name = "palimpsest_contribution"


class _ArchiveAsDict(_DataclassAsDict):
    type = ArchiveFact
    name = "palimpsest_archive"


SNAPSHOT_TRANSCODINGS: tuple[Transcoding, ...] = (
    _ExcerptAsDict(),
    _VersionRecordAsDict(),
    _ContributionAsDict(),
    _ArchiveAsDict(),
)
