"""How snapshot state that is not plain JSON is stored.

A memory's snapshot is its aggregate state: lists of frozen dataclasses
(versions with their excerpts, contributions) and an archival. Events never
need these: their fields are plain values.

Versions, excerpts and contributions are stored as flat lists of plain
values (ids as hex): a long memory's snapshot holds thousands of them, and
decoding one list is several times cheaper than decoding nested objects,
which is what keeps as-of reads of long memories fast.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.persistence import Transcoding

from palimpsest.domain.belief import ArchiveFact, ContributionFact
from palimpsest.domain.evidence import Excerpt
from palimpsest.domain.memory import VersionRecord

__all__ = [
    "SNAPSHOT_TRANSCODINGS",
]


def _excerpt(e: Excerpt) -> list[Any]:
    return [e.observation_id.hex, e.start, e.end, e.excerpt_digest]


def _from_excerpt(data: list[Any]) -> Excerpt:
    return Excerpt(UUID(data[0]), data[1], data[2], data[3])


class _ExcerptAsList(Transcoding):
    type = Excerpt
    name = "palimpsest_excerpt"

    def encode(self, obj: Excerpt) -> list[Any]:
        return _excerpt(obj)

    def decode(self, data: list[Any]) -> Excerpt:
        return _from_excerpt(data)


class _VersionRecordAsList(Transcoding):
    type = VersionRecord
    name = "palimpsest_version"

    def encode(self, obj: VersionRecord) -> list[Any]:
        return [
            obj.version_id.hex,
            obj.content_digest,
            obj.size_bytes,
            [_excerpt(e) for e in obj.excerpts],
            obj.principal_id.hex,
            obj.position_in_memory,
            None if obj.erased_by is None else obj.erased_by.hex,
        ]

    def decode(self, data: list[Any]) -> VersionRecord:
        return VersionRecord(
            version_id=UUID(data[0]),
            content_digest=data[1],
            size_bytes=data[2],
            excerpts=tuple(_from_excerpt(e) for e in data[3]),
            principal_id=UUID(data[4]),
            position_in_memory=data[5],
            # Snapshots taken before erasure existed have six fields.
            erased_by=UUID(data[6]) if len(data) > 6 and data[6] is not None else None,
        )


class _ContributionAsList(Transcoding):
    type = ContributionFact
    name = "palimpsest_contribution"

    def encode(self, obj: ContributionFact) -> list[Any]:
        return [
            obj.contribution_id.hex,
            obj.version_id.hex,
            obj.observation_id.hex,
            obj.proposer_id.hex,
            obj.model_id,
            obj.trust,
            obj.active,
            None if obj.deactivated_by is None else obj.deactivated_by.hex,
        ]

    def decode(self, data: list[Any]) -> ContributionFact:
        return ContributionFact(
            contribution_id=UUID(data[0]),
            version_id=UUID(data[1]),
            observation_id=UUID(data[2]),
            proposer_id=UUID(data[3]),
            model_id=data[4],
            trust=data[5],
            active=data[6],
            deactivated_by=None if data[7] is None else UUID(data[7]),
        )


class _ArchiveAsList(Transcoding):
    type = ArchiveFact
    name = "palimpsest_archive"

    def encode(self, obj: ArchiveFact) -> list[Any]:
        return [obj.reason, obj.decision_id.hex]

    def decode(self, data: list[Any]) -> ArchiveFact:
        return ArchiveFact(reason=data[0], decision_id=UUID(data[1]))


SNAPSHOT_TRANSCODINGS: tuple[Transcoding, ...] = (
    _ExcerptAsList(),
    _VersionRecordAsList(),
    _ContributionAsList(),
    _ArchiveAsList(),
)
