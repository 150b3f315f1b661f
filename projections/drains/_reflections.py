"""Consolidation's second pass: reflections over a cycle's survivors (seed 004).

Only with a summariser configured (there is no fallback: an extractive
"insight" would be a copy, not an abstraction). The survivors are grouped
by scope and project; each group of at least :data:`MIN_SOURCES` (the
:data:`MAX_SOURCES` most recently changed) is shown to the model once, and
each insight it returns is recorded as a reflection drawn from the whole
group, one write each. A group whose exact set of memories already has a
reflection is not asked again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from uuid import UUID

from palimpsest.domain.errors import PalimpsestError
from palimpsest.domain.memory import Memory
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.consolidation import ReflectSpec
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.judgment.judge import JudgeUnavailableError
from palimpsest.projections.judgment.summariser import Summariser
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.version_texts import version_texts

__all__ = ["MAX_SOURCES", "MIN_SOURCES", "reflect"]

_log = logging.getLogger(__name__)

MIN_SOURCES = 3
"""The fewest memories a reflection is drawn from: two are a pair, not a pattern."""
MAX_SOURCES = 20
"""The most memories shown to the model at once."""


def _reflected_sets(log: EventLog, tenant_id: UUID) -> set[frozenset[UUID]]:
    """The source sets of the tenant's unredacted reflections."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT source_ids FROM {schema}.reflections WHERE redacted_position IS NULL",
                log.datastore.schema,
            )
        )
        return {frozenset(row["source_ids"]) for row in cur}


def reflect(
    log: EventLog,
    writer: Writer,
    caller: Caller,
    summariser: Summariser,
    survivors: Sequence[UUID],
    *,
    cycle_id: UUID,
    failures: list[str],
) -> int:
    """Record the model's reflections over the survivors' groups; return how many.
    A failed call or a refused write is added to ``failures`` and the pass goes on."""
    loaded = aggregates_of(log, caller.tenant_id, list(survivors))
    groups: dict[tuple[str, str | None], list[Memory]] = defaultdict(list)
    for memory in loaded.values():
        if isinstance(memory, Memory) and memory.erased_by is None and memory.archived is None:
            groups[(memory.scope, memory.project)].append(memory)
    done = _reflected_sets(log, caller.tenant_id)
    recorded = 0
    for key in sorted(groups, key=lambda k: (k[0], k[1] or "")):
        members = sorted(groups[key], key=lambda m: (-m.version, str(m.id)))[:MAX_SOURCES]
        if len(members) < MIN_SOURCES or frozenset(m.id for m in members) in done:
            continue
        versions = {m.id: m.current_version.version_id for m in members}
        texts = version_texts(log, caller.tenant_id, versions)
        # Oldest first, so the same memories make the same request.
        shown = sorted(
            (m for m in members if texts.get(m.id) and texts[m.id].content),
            key=lambda m: (m.created_on, str(m.id)),
        )
        if len(shown) < MIN_SOURCES:
            continue
        try:
            insights = summariser.reflect([str(texts[m.id].content) for m in shown])
        except JudgeUnavailableError as error:
            failures.append(f"reflections {key}: {error}")
            continue
        seen = tuple((m.id, versions[m.id]) for m in shown)
        for insight in insights:
            spec = ReflectSpec(
                seen=seen, content=insight, model=summariser.model, cycle_id=cycle_id
            )
            try:
                writer.write(caller, [spec], batch=False)
            except PalimpsestError as error:
                failures.append(f"reflection {key}: {error}")
                _log.warning("reflection refused", extra={"error": str(error)})
                continue
            recorded += 1
    return recorded
