"""Adding support: contributions to an existing version, without writing its text again.

A contribution is an excerpt of an observation that a proposer (the caller)
cites as support for one version of a memory. Writing a version records the
writer's own; this adds more, by anyone with the writer role, to the
current version or a named one. Each excerpt goes through the same checks as
a version's evidence (:func:`~palimpsest.projections.commands.memory.cite_evidence`),
and each contribution is its proposer's alone: withdrawing one proposer
deactivates only theirs, and the support the others gave still counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from palimpsest.domain.memory import Memory
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.memory import EvidenceSpec, cite_evidence
from palimpsest.projections.commands.unit_of_work import Item

__all__ = ["ContributionSpec"]


@dataclass(frozen=True)
class ContributionSpec(WriteSpec):
    """Add contributions to a memory's current version (or ``version_id``)."""

    role = "writer"
    action = "add support"

    memory_id: UUID
    version_id: UUID | None
    evidence: tuple[EvidenceSpec, ...]
    model_id: str | None
    trust: float

    def apply(self, batch: Batch) -> Item:
        """Check every excerpt, then record one ``ContributionAdded`` per excerpt.

        Raises:
            NotFoundError: the memory, the version or an observation is unknown.
            InvalidInputError: no evidence, an observation erased or retracted,
                offsets out of range, or trust outside ``[0, 1]``.
            ConflictError: the memory or version was erased, or the caller already
                supports the version with the same observation.
        """
        memory = batch.uow.load(self.memory_id, Memory, "memory")
        version_id = self.version_id or memory.current_version.version_id
        excerpts = cite_evidence(batch, self.evidence)
        added = memory.add_contributions(
            version_id,
            excerpts,
            principal_id=batch.uow.caller.principal_id,
            model_id=self.model_id,
            trust=self.trust,
        )
        return Item(
            memory.id,
            (memory.id, memory.version),
            {
                "memory_id": str(memory.id),
                "version_id": str(version_id),
                "contributions": [
                    {
                        "id": str(contribution_id),
                        "observation_id": str(excerpt.observation_id),
                        "start": excerpt.start,
                        "end": excerpt.end,
                        "excerpt_digest": excerpt.excerpt_digest,
                    }
                    for contribution_id, excerpt in zip(added, excerpts, strict=True)
                ],
            },
        )
