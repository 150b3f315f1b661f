"""``/v1/revision``: how far revision has caught up, for the caller's tenant."""

from __future__ import annotations

from palimpsest.projections.views.revision_status import RevisionStatus

__all__ = ["RevisionStatusPublic"]


class RevisionStatusPublic(RevisionStatus):
    """How far revision has caught up in the caller's tenant."""
