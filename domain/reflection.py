"""The ``Reflection`` aggregate: an insight a model drew from several memories, kept apart.

Consolidation's second pass (seed 004) asks a model for abstract insights
over groups of memories ("raises security concerns after deployments").
They are not memories: no type, no evidence, no belief, no grade. They are
stored apart, with their own events (``ReflectionRecorded``,
``ReflectionRedacted``) and read model, derived from the memories they name
(``sources``, each with the version and digest the model saw), and they are
never returned by recall or listings unless asked for.

A reflection's text may repeat what a source said, so erasing any source
redacts every reflection derived from it (``ReflectionRedacted``, in the
erasure's own write): its text is deleted and never served again.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.domain import Aggregate, event

from palimpsest.domain.errors import InvalidInputError

__all__ = ["Reflection"]


class Reflection(Aggregate):
    """An insight over memories; its text lives in the payload store."""

    TOPIC = "palimpsest:Reflection"

    redacted_by: UUID | None = None
    """The erasure decision that removed its text, if one did."""

    class Created(Aggregate.Created):
        """A model's insight was recorded (``ReflectionRecorded``).

        ``sources`` lists ``{memory_id, version_id, content_digest}`` of each
        memory the model saw.
        """

        TOPIC = "palimpsest:ReflectionRecorded"
        tenant_id: UUID
        scope: str
        project: str | None
        content_digest: str
        size_bytes: int
        sources: list[dict[str, str]]
        model: str
        cycle_id: UUID
        principal_id: UUID

    class Redacted(Aggregate.Event):
        """Its text was erased (``ReflectionRedacted``) because a source was."""

        TOPIC = "palimpsest:ReflectionRedacted"
        content_digest: str
        decision_id: UUID
        principal_id: UUID

    @event(Created)
    def __init__(
        self,
        tenant_id: UUID,
        scope: str,
        project: str | None,
        content_digest: str,
        size_bytes: int,
        sources: list[dict[str, str]],
        model: str,
        cycle_id: UUID,
        principal_id: UUID,
    ) -> None:
        self.tenant_id = tenant_id
        self.scope = scope
        self.project = project
        self.content_digest = content_digest
        self.size_bytes = size_bytes
        self.sources = sources
        self.model = model
        self.cycle_id = cycle_id
        self.principal_id = principal_id

    @classmethod
    def record(
        cls,
        *,
        tenant_id: UUID,
        scope: str,
        project: str | None,
        content_digest: str,
        size_bytes: int,
        sources: list[dict[str, str]],
        model: str,
        cycle_id: UUID,
        principal_id: UUID,
    ) -> Reflection:
        """Return a new reflection.

        Raises:
            InvalidInputError: fewer than two distinct sources (an insight over one
                memory is a summary of it, not a reflection), or no model.
        """
        if len({s["memory_id"] for s in sources}) < 2:
            msg = "a reflection is drawn from two or more memories"
            raise InvalidInputError(msg)
        if not model.strip():
            msg = "a reflection names the model that drew it"
            raise InvalidInputError(msg)
        return cls(
            tenant_id=tenant_id,
            scope=scope,
            project=project,
            content_digest=content_digest,
            size_bytes=size_bytes,
            sources=sources,
            model=model,
            cycle_id=cycle_id,
            principal_id=principal_id,
        )

    @property
    def source_ids(self) -> list[UUID]:
        """The memories it was drawn from."""
        return [UUID(s["memory_id"]) for s in self.sources]

    def redact(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Erase its text. Returns False (and records nothing) if it is redacted."""
        if self.redacted_by is not None:
            return False
        self._redacted(
            content_digest=self.content_digest, decision_id=decision_id, principal_id=principal_id
        )
        return True

    @event(Redacted)
    def _redacted(self, content_digest: str, decision_id: UUID, principal_id: UUID) -> None:
        self.redacted_by = decision_id
