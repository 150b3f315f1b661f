"""The memory writes a route calls by name: create a memory, revise one.

Each is one call that a reader (or a tool that follows calls by name) can click
through: the role check, the idempotency lookup, the unit of work built on the
aggregate (:func:`~palimpsest.projections.commands.memory.new_memory`, which calls
:meth:`Memory.create <palimpsest.domain.memory.Memory.create>`), and the one
transaction that records it (:meth:`Writer.record
<palimpsest.projections.commands.writer.Writer.record>`, which calls
:meth:`EventLog.record <palimpsest.projections.store.eventlog.EventLog.record>`).
They take the steps :meth:`Writer.write
<palimpsest.projections.commands.writer.Writer.write>` takes for any specs, with
the spec's work named rather than dispatched through ``apply``; a batch (and the
MCP tools' writes, an observation and a memory in one) still goes through
``Writer.write``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palimpsest.projections.commands.memory import MemorySpec, VersionSpec, new_memory, new_version
from palimpsest.projections.store.tenancy import tenant_scope

if TYPE_CHECKING:
    from palimpsest.projections.commands.caller import Caller
    from palimpsest.projections.commands.writer import WriteOutcome, Writer

__all__ = ["create_memory", "revise_memory"]


def create_memory(
    writer: Writer,
    caller: Caller,
    spec: MemorySpec,
    *,
    idempotency: tuple[str, str] | None = None,
) -> WriteOutcome:
    """Create the memory ``spec`` asks for, with its first version (and its
    ``supersedes`` edges), in one transaction; return the response: its ``id``,
    ``version_id`` and ``position``.

    ``idempotency`` is ``(key, request_digest)``: a key answered before with the
    same digest returns that response and writes nothing.

    Raises:
        PermissionDeniedError: the caller's role may not create memories (checked
            first: nothing is read or written).
        IdempotencyKeyReusedError: the key was used for a different request.
        NotFoundError, InvalidInputError, EvidenceErasedError, EvidenceRetractedError,
            EvidenceOutOfRangeError, EdgeNotAllowedError: the write is refused.
        ConcurrentWriteError: other writers kept winning the memories it supersedes.
        DatabaseUnavailableError: the event log could not be written.
    """
    caller.require(MemorySpec.role, MemorySpec.action)
    with tenant_scope(caller.tenant_id):
        replayed = writer.replay(caller, idempotency)
        if replayed is not None:
            return replayed
        for _ in writer.attempts():
            with writer.building():
                work = writer.begin(caller)
                work.items.append(new_memory(work, spec))
            outcome = writer.record(work, idempotency)
            if outcome is not None:
                return outcome
    raise writer.gave_up()


def revise_memory(
    writer: Writer,
    caller: Caller,
    spec: VersionSpec,
    *,
    idempotency: tuple[str, str] | None = None,
) -> WriteOutcome:
    """Record the new version of a memory ``spec`` asks for (restoring the memory
    first when it is archived and ``spec.if_archived`` says so) in one transaction;
    return the response: ``memory_id``, ``version_id`` and ``position``.

    ``idempotency``: as for :func:`create_memory`.

    Raises:
        PermissionDeniedError: the caller's role may not record versions.
        IdempotencyKeyReusedError: the key was used for a different request.
        NotFoundError: the memory, or a cited observation, is unknown.
        MemoryForgottenError, MemorySupersededError: it is archived and
            ``spec.if_archived`` says ``refuse``.
        InvalidInputError, EvidenceErasedError, EvidenceRetractedError,
            EvidenceOutOfRangeError: its content or evidence is refused.
        ConcurrentWriteError: other writers kept winning the memory.
        DatabaseUnavailableError: the event log could not be written.
    """
    caller.require(VersionSpec.role, VersionSpec.action)
    with tenant_scope(caller.tenant_id):
        replayed = writer.replay(caller, idempotency)
        if replayed is not None:
            return replayed
        for _ in writer.attempts():
            with writer.building():
                work = writer.begin(caller)
                work.items.append(new_version(work, spec))
            outcome = writer.record(work, idempotency)
            if outcome is not None:
                return outcome
    raise writer.gave_up()
