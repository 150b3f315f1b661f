"""The forgetting pass for one tenant: candidates, a judge, proposals (seed 000).

1. Read the tenant's judgment policy; not opted in, the pass stops there,
   having read nothing else (there is no fallback).
2. Select candidates (:mod:`palimpsest.projections.recall.pass_candidates`): stale
   singles with their newer neighbours, and likely conflicting pairs.
3. Render them as the judge's items and split them into the batches the
   judge sends, one request each (``Judge.batches``, measuring the request).
4. For each batch: read the policy again (an opt-out stops the pass at the
   next call), reserve the call and its tokens in the day's budget
   (:mod:`palimpsest.projections.drains.judge_budget`; a spent budget stops the pass,
   which never bills past it), send, record what the server reported (or
   release the reservation when the call failed).
5. Record each verdict as a proposal through the write path, one write per
   verdict so one refusal (the memory was erased meanwhile) costs only
   itself: ``proposed`` at or above its action's threshold, ``dismissed``
   otherwise (a keep always). A memory with an open proposal of the same
   action is not proposed again: that verdict is recorded dismissed.

A dry run stops after step 3 and reports what would be sent, without
calling the judge or writing anything. With the operator judge (no judge
object: a person) the pass stops there too and reports the items as
``queued``: they are what ``GET /v1/forgetting/items`` lists for people to
answer, until a verdict (or a newer memory) takes each out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from uuid import UUID, uuid4

from palimpsest.domain.errors import PalimpsestError
from palimpsest.domain.judge_state import (
    JudgeItem,
    MemoryView,
    PairItem,
    SingleItem,
    state_chars,
    verdict_memories,
)
from palimpsest.domain.memory import Memory
from palimpsest.domain.proposal import dismissed
from palimpsest.domain.tenant import principal_id_for
from palimpsest.domain.verdicts import Verdict
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.judgment import judgment_for
from palimpsest.projections.commands.proposals import (
    ProposalSettings,
    ProposeSpec,
    open_proposal_ids,
)
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains.judge_budget import record, release, reserve
from palimpsest.projections.drains.settings import ForgettingPassSettings
from palimpsest.projections.judgment.judge import ItemFailure, Judge, JudgeUnavailableError
from palimpsest.projections.recall.pass_candidates import (
    PassCandidates,
    PassSettings,
    select_candidates,
)
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import known_tenants
from palimpsest.projections.views.version_texts import version_texts

__all__ = [
    "Claim",
    "PASS_PRINCIPAL",
    "PassReport",
    "ScheduledPass",
    "claim_day",
    "finish_day",
    "judge_items",
    "renew_day",
    "run_pass",
]

_log = logging.getLogger(__name__)

PASS_PRINCIPAL = "forgetting-pass"
"""The principal the pass records proposals as, in each tenant."""

_CHARS_PER_TOKEN = 3
"""A conservative estimate for reserving a request's prompt tokens before sending."""
_COMPLETION_TOKENS_PER_ITEM = 16
"""The completion tokens reserved per item (an answer is a letter, or a short JSON)."""

Stop = Literal["not-opted-in", "opted-out", "budget", "judge-unavailable"]


@dataclass
class PassReport:
    """What one pass over a tenant did."""

    tenant_id: UUID
    run_id: UUID
    dry_run: bool
    singles: int = 0
    pairs: int = 0
    items: int = 0
    batches: int = 0
    judged: int = 0
    proposed: int = 0
    dismissed: int = 0
    failed: int = 0
    already_open: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    queued: int = 0
    """Items left for people to judge (the operator judge), at ``GET /v1/forgetting/items``."""
    stopped: Stop | None = None
    """Why the pass stopped before judging every item, if it did."""
    failures: list[str] = field(default_factory=list)


def _view(memory: Memory, text: str | None, time: datetime) -> MemoryView:
    version = memory.current_version
    return MemoryView(
        memory_id=memory.id,
        memory_type=memory.memory_type,
        scope=memory.scope,
        project=memory.project,
        topic=memory.topic,
        content=text or "",
        recorded_at=time,
        version_id=version.version_id,
        content_digest=version.content_digest,
    )


def judge_items(log: EventLog, tenant_id: UUID, found: PassCandidates) -> list[JudgeItem]:
    """Return the candidates as the judge's items (singles ``s0``…, pairs ``p0``…),
    with each memory's current text; a memory whose text is gone is left out."""
    times: dict[UUID, datetime] = {}
    for single in found.singles:
        times[single.memory_id] = single.memory_time
        times.update((n.memory_id, n.memory_time) for n in single.newer)
    for pair in found.pairs:
        times[pair.older_id] = pair.older_time
        times[pair.newer_id] = pair.newer_time
    loaded = aggregates_of(log, tenant_id, sorted(times, key=str))
    memories = {i: m for i, m in loaded.items() if isinstance(m, Memory) and m.erased_by is None}
    texts = version_texts(
        log, tenant_id, {i: m.current_version.version_id for i, m in memories.items()}
    )
    views = {
        i: _view(m, texts[i].content, times[i])
        for i, m in memories.items()
        if i in texts and texts[i].content is not None
    }
    items: list[JudgeItem] = []
    for n, single in enumerate(found.singles):
        if single.memory_id in views:
            newer = tuple(views[x.memory_id] for x in single.newer if x.memory_id in views)
            items.append(SingleItem(f"s{n}", views[single.memory_id], newer))
    for n, pair in enumerate(found.pairs):
        if pair.older_id in views and pair.newer_id in views:
            items.append(
                PairItem(f"p{n}", views[pair.older_id], views[pair.newer_id], pair.similarity)
            )
    return items


def _seen(item: JudgeItem) -> list[MemoryView]:
    if isinstance(item, PairItem):
        return [item.older, item.newer]
    return [item.memory, *item.newer]


def run_pass(
    log: EventLog,
    writer: Writer,
    tenant_id: UUID,
    judge: Judge | None,
    *,
    now: datetime,
    candidates: PassSettings,
    proposals: ProposalSettings,
    model_id: str,
    dry_run: bool = False,
) -> PassReport:
    """Run the forgetting pass over one tenant (see the module's steps); never
    raises for one item's or one batch's failure, which the report counts.
    ``judge`` None is the operator judge: the items are queued for people."""
    report = PassReport(tenant_id, uuid4(), dry_run)
    if not judgment_for(log, tenant_id).enabled:
        report.stopped = "not-opted-in"
        return report
    found = select_candidates(log, tenant_id, now=now, settings=candidates, model_id=model_id)
    report.singles, report.pairs = len(found.singles), len(found.pairs)
    items = judge_items(log, tenant_id, found)
    report.items = len(items)
    if judge is None:
        report.queued = 0 if dry_run else len(items)
        return report
    parts = judge.batches(now, items)  # one request each: one reservation each
    report.batches = len(parts)
    if dry_run:
        return report
    caller = Caller(
        tenant_id, principal_id_for(tenant_id, PASS_PRINCIPAL), PASS_PRINCIPAL, "writer"
    )
    thresholds = proposals.thresholds()
    day = now.astimezone(UTC).date()
    for batch in parts:
        policy = judgment_for(log, tenant_id)  # immediately before every send
        if not policy.enabled:
            report.stopped = "opted-out"
            break
        tokens = state_chars(now, batch) // _CHARS_PER_TOKEN + _COMPLETION_TOKENS_PER_ITEM * len(
            batch
        )
        reservation = reserve(
            log,
            tenant_id,
            day,
            tokens=tokens,
            daily_calls=policy.daily_calls,
            daily_tokens=policy.daily_tokens,
        )
        if reservation is None:
            report.stopped = "budget"
            break
        try:
            results = judge.judge(now, batch)
        except JudgeUnavailableError as error:
            release(log, reservation)
            report.stopped = "judge-unavailable"
            report.failures.append(str(error))
            _log.error(
                "judge unavailable", extra={"tenant_id": str(tenant_id), "error": str(error)}
            )
            break
        usage = judge.usage
        record(
            log,
            reservation,
            calls=max(usage.calls, 1),
            prompt=usage.prompt_tokens,
            completion=usage.completion_tokens,
        )
        report.calls += max(usage.calls, 1)
        report.prompt_tokens += usage.prompt_tokens
        report.completion_tokens += usage.completion_tokens
        for item, result in zip(batch, results, strict=True):
            _propose(log, writer, caller, report, item, result, thresholds, judge.model)
    return report


def _propose(
    log: EventLog,
    writer: Writer,
    caller: Caller,
    report: PassReport,
    item: JudgeItem,
    result: object,
    thresholds: dict[str, float],
    model: str,
) -> None:
    """Record one item's verdict as a proposal, counting what became of it."""
    if isinstance(result, ItemFailure):
        report.failed += 1
        report.failures.append(f"{result.ref}: {result.error}")
        return
    assert isinstance(result, Verdict)
    report.judged += 1
    try:
        memory_id, related = verdict_memories(item, result)
    except PalimpsestError as error:
        report.failed += 1
        report.failures.append(f"{item.ref}: {error}")
        return
    gone = dismissed(result.action, result.probability, thresholds)
    if not gone and memory_id in open_proposal_ids(log, caller.tenant_id, result.action):
        # Recorded dismissed, not dropped: the verdict is kept for calibration, and it
        # holds the item back from the next pass as any verdict does.
        report.already_open += 1
        gone = True
    spec = ProposeSpec(
        memory_id=memory_id,
        verdict=result.action,
        related_memory_id=related,
        probability=result.probability,
        distribution=None
        if result.distribution is None
        else {str(k): p for k, p in result.distribution.items()},
        model=result.model or model,
        run_id=report.run_id,
        dismissed=gone,
        note=result.note,
        seen=[(v.memory_id, v.version_id, v.content_digest) for v in _seen(item)],
    )
    try:
        writer.write(caller, [spec], batch=False)
    except PalimpsestError as error:
        report.failed += 1
        report.failures.append(f"{item.ref}: {error}")
        return
    if gone:
        report.dismissed += 1
    else:
        report.proposed += 1


Claim = Literal["claimed", "held", "finished"]
"""What claiming a day found: claimed by this call (the day is this run's), held by
another run whose lease lasts, or finished."""


def claim_day(log: EventLog, day: date, *, now: datetime, lease: timedelta) -> Claim:
    """Claim the scheduled pass of ``day`` (UTC) until ``now + lease``, unless it is
    finished, or held by a claim whose lease lasts past ``now``.

    A claim never finished and not renewed in time (its process died, or its pass
    failed) is taken over: a day is never skipped for a run that did not finish it.
    """
    schema = log.datastore.schema
    # The lease is in the scheduler's time (``now``), the clock its due times are in.
    with log.datastore.transaction(commit=True) as cur:
        cur.execute(
            schema_sql(
                "INSERT INTO {schema}.forgetting_runs (day, started_at, held_until)"
                " VALUES (%(day)s, %(now)s, %(until)s) ON CONFLICT (day) DO UPDATE"
                " SET started_at = excluded.started_at, held_until = excluded.held_until"
                " WHERE forgetting_runs.finished_at IS NULL AND"
                " (forgetting_runs.held_until IS NULL OR forgetting_runs.held_until <= %(now)s)"
                " RETURNING day",
                schema,
            ),
            {"day": day, "now": now, "until": now + lease},
        )
        if cur.fetchone() is not None:
            return "claimed"
        cur.execute(
            schema_sql("SELECT finished_at FROM {schema}.forgetting_runs WHERE day = %s", schema),
            (day,),
        )
        row = cur.fetchone()
    return "finished" if row is not None and row["finished_at"] is not None else "held"


def renew_day(log: EventLog, day: date, *, until: datetime) -> None:
    """Hold the unfinished claim of ``day`` until ``until`` at least (a run still going)."""
    with log.datastore.transaction(commit=True) as cur:
        cur.execute(
            schema_sql(
                "UPDATE {schema}.forgetting_runs SET held_until = greatest(held_until, %s)"
                " WHERE day = %s AND finished_at IS NULL",
                log.datastore.schema,
            ),
            (until, day),
        )


def finish_day(log: EventLog, day: date) -> None:
    """Record that the scheduled pass of ``day`` finished."""
    with log.datastore.transaction(commit=True) as cur:
        cur.execute(
            schema_sql(
                "UPDATE {schema}.forgetting_runs SET finished_at = clock_timestamp()"
                " WHERE day = %s",
                log.datastore.schema,
            ),
            (day,),
        )


@dataclass
class ScheduledPass:
    """The daily forgetting pass, for a drain loop or a worker to call at each sweep.

    Disabled (``PALIMPSEST_FORGETTING_PASS_ENABLED`` false, or no judge), a call
    returns at once having read nothing. Enabled, a call after the day's due time
    claims the day for a lease (one row per day: whichever process claims it runs
    it) and runs the pass over every opted-in tenant, renewing the claim as it goes.
    The day is marked done only once the pass went over every tenant without an
    error; until then later calls leave the day to the claim while its lease lasts,
    then claim it again and run it (a process killed mid-pass, or a database error,
    never skips a day). Once a day is done, later calls that day do nothing.
    """

    log: EventLog
    writer: Writer
    judge: Judge | None
    settings: ForgettingPassSettings
    model_id: Callable[[], str]
    candidates: PassSettings = field(default_factory=PassSettings)
    proposals: ProposalSettings = field(default_factory=ProposalSettings)
    done: date | None = None
    """The last day this process found finished (by it or another), so a sweep after
    that costs no query until the next day is due."""

    def __call__(self, now: datetime) -> list[PassReport] | None:
        """Run the day's pass if it is due and neither finished nor held by another
        run; return its reports (None when nothing ran).

        Raises:
            PersistenceError: the database failed outside one tenant's pass (the claim,
                the list of tenants): the day is left to the next call.
        """
        if not self.settings.forgetting_pass_enabled or self.judge is None:
            return None
        due = self.settings.schedule.last_due(now)
        day = due.date()
        if self.done == day:
            return None
        lease = self.settings.lease
        claim = claim_day(self.log, day, now=now, lease=lease)
        if claim == "finished":
            self.done = day
        if claim != "claimed":
            return None
        started, renewed = time.monotonic(), time.monotonic()
        reports, failed = [], 0
        for tenant_id in known_tenants(self.log.datastore):
            if time.monotonic() - renewed > lease.total_seconds() / 4:
                # Still going: hold the day for a lease from now (the call's ``now``
                # moved on by the time the pass has taken).
                renewed = time.monotonic()
                renew_day(self.log, day, until=now + timedelta(seconds=renewed - started) + lease)
            try:
                reports.append(
                    run_pass(
                        self.log,
                        self.writer,
                        tenant_id,
                        self.judge,
                        now=now,
                        candidates=self.candidates,
                        proposals=self.proposals,
                        model_id=self.model_id(),
                    )
                )
            except Exception:  # one tenant's failure never stops the others
                failed += 1
                _log.exception("forgetting pass failed", extra={"tenant_id": str(tenant_id)})
        ran = [r for r in reports if r.stopped != "not-opted-in"]
        summary = {
            "day": day.isoformat(),
            "tenants": len(ran),
            "proposed": sum(r.proposed for r in ran),
            "dismissed": sum(r.dismissed for r in ran),
        }
        if failed:
            # Not done: the next run after this claim's lease runs the day again (a
            # tenant whose pass completed finds its candidates judged already).
            _log.warning("forgetting pass unfinished", extra={**summary, "failed": failed})
            return reports
        finish_day(self.log, day)
        self.done = day
        _log.info("forgetting pass done", extra=summary)
        return reports
