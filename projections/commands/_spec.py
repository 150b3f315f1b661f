"""Write specs: what a caller asks to write, the role it needs, and how it is applied.

Every write is a frozen spec that subclasses :class:`WriteSpec`: it declares
the role a caller needs (``reader``, ``writer`` or ``admin``) and applies
itself to the request's :class:`Batch`. The writer checks every spec's role
before anything is read, then calls ``apply`` on each in order: adding a
write means adding a spec, nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.role import ROLES, Role
from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork

__all__ = [
    "Batch",
    "Id",
    "Ref",
    "WriteSpec",
]


@dataclass(frozen=True)
class Ref:
    """A reference, inside a batch, to the id produced by an earlier item."""

    index: int


Id = UUID | Ref


@dataclass
class Batch:
    """The specs of one request (one write, or up to 1,000), applied in order to one
    unit of work, with the deployment's capture policy and clock."""

    uow: UnitOfWork
    policy: CapturePolicy
    clock: Callable[[], datetime]
    items: list[Item] = field(default_factory=list)
    """What the specs applied so far produced, in order (``$N`` names item N)."""
    retention: tuple[timedelta, timedelta] | None = None
    """The tenant's (raw, transient) retention, read once for the request's captures."""

    def resolve(self, ref: Id) -> UUID:
        """Return the id ``ref`` names: itself, or the id an earlier item produced.

        Raises:
            InvalidInputError: ``ref`` names no earlier item of the batch.
        """
        if isinstance(ref, UUID):
            return ref
        if not 0 <= ref.index < len(self.items):
            msg = f"reference ${ref.index} does not name an earlier item of this batch"
            raise InvalidInputError(msg)
        return self.items[ref.index].id


class WriteSpec(ABC):
    """A write a caller asks for: the role it needs, and how it applies."""

    role: ClassVar[Role]
    """The least role a caller needs; the writer refuses anyone below it."""
    action: ClassVar[str]
    """What the spec does, as a verb phrase for refusals ("erase")."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "role", None) not in ROLES or not getattr(cls, "action", ""):
            msg = f"{cls.__name__} must declare its role (one of {ROLES}) and its action"
            raise TypeError(msg)

    @abstractmethod
    def apply(self, batch: Batch) -> Item:
        """Apply the spec to the batch's unit of work and return what it produced.

        It loads aggregates through the unit of work and changes them there;
        nothing is recorded until the writer saves the whole batch.

        Raises:
            InvalidInputError, NotFoundError, ConflictError: the spec is refused.
        """
