"""Restore rate: how often a forgotten or decay-archived memory was restored, and how soon.

An internal tuning signal (seed 003), deliberately not an API, not a metric
and not a documented feature: it replays a store's log and, for each
archival by a forget (``MemoryArchived``), finds whether a later
``MemoryRestored`` reversed it and after how long. Archivals are split by
what made them, ``decayed`` or ``forgotten``, and by the policy version they
were decided under:

- archived by a decay cycle itself (reason ``decayed``): ``decayed``, under
  ``forgetting-policy/N``, the tenant policy version its ``CycleCompleted``
  (which lists the memory as archived) records;
- archived by applying a proposal (reason ``proposal <id>…``): ``decayed``
  for a decay cycle's ``decay`` proposal, ``forgotten`` otherwise, under the
  proposal's recorded policy version;
- any other forget (a person): ``forgotten``, under the decision's recorded
  rules version.

A high rate for a policy version says it forgot too eagerly; how soon says
whether the loss was noticed at once or much later.

Structural archival (a ``supersedes`` edge, a merge) is not counted: it is
undone by retracting the edge, not restored.

    .venv/bin/python -m tests.benchmarks.restore_rate --data-dir DIR [--tenant ID]
    .venv/bin/python -m tests.benchmarks.restore_rate --database-url URL
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from palimpsest.domain.cycle import Cycle
from palimpsest.domain.decision import Decision
from palimpsest.domain.memory import Memory
from palimpsest.domain.proposal import Proposal
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = ["RestoreRate", "main", "restore_rates"]

_TOPICS = (
    Memory.Archived.TOPIC,
    Memory.Restored.TOPIC,
    Decision.Created.TOPIC,
    Proposal.Created.TOPIC,
    Cycle.Created.TOPIC,
)


@dataclass
class RestoreRate:
    """Archivals of one cause under one policy version, and which were restored."""

    cause: str
    policy_version: str
    archived: int = 0
    restored: int = 0
    delays: list[timedelta] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """The share of archivals later restored."""
        return self.restored / self.archived if self.archived else 0.0

    def line(self) -> str:
        """One row of the report."""
        if self.delays:
            hours = sorted(d.total_seconds() / 3600 for d in self.delays)
            soon = f"median {statistics.median(hours):.1f} h, max {hours[-1]:.1f} h"
        else:
            soon = "-"
        return (
            f"{self.cause:<10} {self.policy_version:<24} {self.archived:>8} "
            f"{self.restored:>8} {self.rate:>7.1%}  {soon}"
        )


def _events(log: EventLog, tenant_id: UUID) -> list[Any]:
    """The tenant's archivals, restores and decisions, in log order."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT originator_id, originator_version, topic, state"
                " FROM {schema}.palimpsest_events WHERE topic = ANY(%s)"
                " ORDER BY notification_id",
                log.datastore.schema,
            ),
            (list(_TOPICS),),
        )
        rows = cur.fetchall()
    return [
        log.mapper.to_domain_event(
            StoredEvent(
                row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"])
            )
        )
        for row in rows
    ]


def _cause(
    event: Any,
    decisions: dict[UUID, str],
    proposals: dict[str, tuple[str, str]],
    cycles: list[tuple[datetime, int, set[str]]],
) -> tuple[str, str]:
    """Return what archived a memory (``decayed`` or ``forgotten``) and under which
    policy version (see the module)."""
    reason = str(event.reason)
    if reason.startswith("decayed"):
        memory = str(event.originator_id)
        for at, policy, archived in cycles:
            if at >= event.timestamp and memory in archived:
                return "decayed", f"forgetting-policy/{policy}"
        return "decayed", "?"
    if reason.startswith("proposal "):
        found = proposals.get(reason.split()[1].rstrip(":"))
        if found is not None:
            action, recorded = found
            return ("decayed" if action == "decay" else "forgotten"), recorded
    return "forgotten", decisions.get(event.decision_id, "?")


def restore_rates(log: EventLog, tenant_id: UUID) -> list[RestoreRate]:
    """Return the tenant's restore rate per cause and policy version (see the module)."""
    decisions: dict[UUID, str] = {}
    proposals: dict[str, tuple[str, str]] = {}
    cycles: list[tuple[datetime, int, set[str]]] = []
    open_archivals: dict[UUID, tuple[RestoreRate, datetime]] = {}
    rates: dict[tuple[str, str], RestoreRate] = defaultdict(lambda: RestoreRate("", ""))
    events = _events(log, tenant_id)
    # A decision (and a cycle) is recorded after the effects it takes, in the same write.
    for event in events:
        if isinstance(event, Decision.Created):
            decisions[event.originator_id] = event.policy_version
        elif isinstance(event, Proposal.Created):
            proposals[str(event.originator_id)] = (event.action, event.policy_version)
        elif isinstance(event, Cycle.Created):
            cycles.append((event.timestamp, event.policy_version, set(event.archived)))
    for event in events:
        if isinstance(event, Memory.Archived):
            cause, version = _cause(event, decisions, proposals, cycles)
            rate = rates[(cause, version)]
            rate.cause, rate.policy_version = cause, version
            rate.archived += 1
            open_archivals[event.originator_id] = (rate, event.timestamp)
        elif isinstance(event, Memory.Restored):
            opened = open_archivals.pop(event.originator_id, None)
            if opened is not None:
                rate, since = opened
                rate.restored += 1
                rate.delays.append(event.timestamp - since)
    return sorted(rates.values(), key=lambda r: (r.cause, r.policy_version))


def main() -> None:
    """Print the restore rates of every tenant of a store (or one)."""
    from palimpsest.projections.runtime import start_runtime

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--database-url")
    parser.add_argument("--tenant", type=UUID)
    args = parser.parse_args()
    given: dict[str, Any] = {}
    if args.data_dir is not None:
        given["data_dir"] = args.data_dir
    if args.database_url is not None:
        given["DATABASE_URL"] = args.database_url
    runtime = start_runtime(DatabaseSettings(**given))
    try:
        schema = runtime.database.schema
        if args.tenant is not None:
            tenants = [args.tenant]
        else:
            with runtime.database.owner_connection() as conn:
                tenants = [
                    r[0]
                    for r in conn.execute(
                        f'SELECT DISTINCT tenant_id FROM "{schema}".palimpsest_events'
                    )
                ]
        print(f"{'cause':<10} {'policy version':<24} {'archived':>8} {'restored':>8} {'rate':>7}")
        for tenant_id in tenants:
            rates = restore_rates(runtime.log, tenant_id)
            if rates:
                print(f"tenant {tenant_id}")
                for rate in rates:
                    print(rate.line())
    finally:
        runtime.close()


if __name__ == "__main__":
    main()
