"""Which versions an erasure removes: the lineage rule, as a pure function.

A version is formed from the observations its excerpts cite. Erasing
observations removes every version formed *only* from them: a version that
also cites a surviving observation keeps its content (its support from the
erased ones stops counting), and a version that cites nothing was not formed
from any observation, so no observation's erasure reaches it. Erasing a
memory removes all of its versions.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from uuid import UUID

__all__ = [
    "versions_formed_only_from",
]


def versions_formed_only_from(
    versions: Iterable[tuple[UUID, Set[UUID]]], erased_observations: Set[UUID]
) -> list[UUID]:
    """Return the ids of versions whose cited observations are all erased.

    Args:
        versions: (version id, observations its excerpts cite), in order.
        erased_observations: every observation erased so far, this erasure included.

    Returns:
        The matching version ids, in the order given; versions citing nothing
        never match.
    """
    return [
        version_id
        for version_id, cited in versions
        if cited and all(o in erased_observations for o in cited)
    ]
