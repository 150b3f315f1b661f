"""Settling a potential conflict: the caller, having read both memories, decides that
one supersedes the other, or that both stand.

The caller is the judge here (an agent's own model, or a person): palimpsest
only found the pair by similarity (``GET /v1/memories/{id}/candidates``) and
records what the caller decided, with its reason and as its principal.

- ``supersedes``: a ``supersedes`` edge from the memory to the other, an
  ``add_edge`` decision exactly as the edges API records it (the other is
  archived structurally).
- ``both_stand``: a ``dismiss_conflict`` decision about the pair
  (:data:`palimpsest.domain.decision.DISMISS_CONFLICT`). It changes no label;
  its logical key (:func:`palimpsest.domain.decision.dismissal_key`) is the same
  whichever memory is named first, so recall can find it in ``decision_index``
  and stop marking the pair.

A settlement is decided on the two aggregates, never on a read model. It is
refused when it can no longer mean what the caller judged: either memory
forgotten (``MemoryForgottenError``), superseded by a third
(``MemorySupersededError``) or erased (``ContentErasedError``), or the pair
settled the other way already (``AlreadySettledError``). The same settlement
asked again replays the original decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from palimpsest.domain.decision import DISMISS_CONFLICT, dismissal_key, dismissal_subject
from palimpsest.domain.errors import AlreadySettledError, ContentErasedError, InvalidInputError
from palimpsest.domain.memory import Memory
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.decisions import (
    Operations,
    find_decision,
    record_decision,
    seen_version,
)
from palimpsest.projections.commands.memory import EdgeSpec, refuse_unless_current
from palimpsest.projections.commands.unit_of_work import Item

__all__ = ["Resolution", "SettleSpec"]

Resolution = Literal["supersedes", "both_stand"]

_STALE = "recall again: the conflict is about memories that are no longer current"


@dataclass(frozen=True)
class SettleSpec(WriteSpec):
    """Settle the potential conflict between ``memory_id`` and ``other_id``."""

    role = "writer"
    action = "settle potential conflicts"

    memory_id: UUID
    """The memory the caller keeps (the new one, when it supersedes the other)."""
    other_id: UUID
    resolution: Resolution
    reason: str

    def apply(self, batch: Batch) -> Item:
        """Record the settlement, or replay the same one recorded before.

        Raises:
            InvalidInputError: both ids name one memory.
            NotFoundError: either memory is unknown.
            ContentErasedError: either memory was erased.
            AlreadySettledError: the pair was settled the other way.
            MemoryForgottenError, MemorySupersededError: either memory is archived
                (not by the other, as this very settlement would leave it).
            EdgeNotAllowedError: an event memory cannot be superseded.
        """
        uow = batch.uow
        memory = uow.load(self.memory_id, Memory, "memory")
        other = uow.load(self.other_id, Memory, "memory")
        if memory.id == other.id:  # after the loads: an unknown id is 404 either way
            msg = f"memory {memory.id} cannot conflict with itself: name another memory"
            raise InvalidInputError(msg)
        for each in (memory, other):
            if each.erased_by is not None:
                msg = f"memory {each.id} was erased (decision {each.erased_by})"
                raise ContentErasedError(msg, each.erased_by)
        dismissed = find_decision(uow.log, uow.caller.tenant_id, dismissal_key(memory.id, other.id))
        forward = memory.has_edge("supersedes", other.id)
        backward = other.has_edge("supersedes", memory.id)
        if backward:
            msg = (
                f"memory {other.id} already supersedes memory {memory.id}: retract that edge "
                "first if the newer claim is the other one"
            )
            raise AlreadySettledError(msg)
        if self.resolution == "supersedes" and dismissed is not None:
            msg = (
                f"memories {memory.id} and {other.id} were recorded as both standing "
                f"(decision {dismissed[0]}); add a supersedes edge with the edges API if "
                "that changed"
            )
            raise AlreadySettledError(msg)
        if self.resolution == "both_stand" and forward:
            msg = (
                f"memory {memory.id} already supersedes memory {other.id}: retract that edge "
                "first if both stand"
            )
            raise AlreadySettledError(msg)
        replay = forward if self.resolution == "supersedes" else dismissed is not None
        if not replay:
            # The other is left superseded by this very settlement on a replay, so the
            # check is only for a settlement not recorded yet.
            for each in (memory, other):
                refuse_unless_current(batch, each, if_forgotten=_STALE, if_superseded=_STALE)
        if self.resolution == "supersedes":
            return self._supersede(batch)
        return self._dismiss(batch, memory, other, replay)

    def _supersede(self, batch: Batch) -> Item:
        edge = EdgeSpec(self.memory_id, "supersedes", self.other_id, self.reason).apply(batch)
        return Item(
            edge.id,
            edge.last_event,
            self._fields(edge.fields["decision_id"], edge.fields["id"], edge.fields["replayed"]),
            position=edge.position,
        )

    def _dismiss(self, batch: Batch, memory: Memory, other: Memory, replay: bool) -> Item:
        def take(decision_id: UUID) -> Operations:
            if replay:
                return [], [], []
            accepted = {
                "op": DISMISS_CONFLICT,
                "memory_id": str(memory.id),
                "other_id": str(other.id),
            }
            return [accepted], [], [seen_version(memory), seen_version(other)]

        decided = record_decision(
            batch.uow,
            kind=DISMISS_CONFLICT,
            subject=dismissal_subject(memory.id, other.id),
            params={},
            inputs=[
                {"kind": "memory", "id": str(memory.id)},
                {"kind": "memory", "id": str(other.id)},
            ],
            take=take,
            nothing_to_do=None,
            reason=self.reason,
        )
        fields = self._fields(decided.fields["id"], None, decided.fields["replayed"])
        return Item(decided.id, decided.last_event, fields, position=decided.position)

    def _fields(self, decision_id: object, edge_id: object, replayed: object) -> dict[str, object]:
        return {
            "memory_id": str(self.memory_id),
            "other_id": str(self.other_id),
            "resolution": self.resolution,
            "decision_id": str(decision_id),
            "edge_id": None if edge_id is None else str(edge_id),
            "replayed": bool(replayed),
        }
