"""Replay in any split rebuilds the same memory, over every event type of ``Memory``.

A memory's events are saved in arbitrary chunks (as separate writes would
save them) and loaded back: from the events alone, and from a snapshot taken
at an arbitrary version plus the events after it (as the store loads long
memories). Either way the state must be the state the live aggregate
reached. The operations drawn cover every mutator of ``Memory``, refused
ones included (a refused operation records nothing); a test checks that the
run produced every event class ``Memory`` declares, so a new event type
fails here until the strategy learns to produce it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import JSONTranscoder
from eventsourcing.utils import get_topic
from hypothesis import event, given, settings
from hypothesis import strategies as st

from palimpsest.domain.errors import PalimpsestError
from palimpsest.domain.evidence import cut_excerpt
from palimpsest.domain.memory import Memory
from palimpsest.projections.store._transcodings import SNAPSHOT_TRANSCODINGS

OBSERVATIONS = [uuid4() for _ in range(3)]
PRINCIPALS = [uuid4() for _ in range(2)]
TEXT = "some evidence text, long enough to cut excerpts from"


class _Log(Application[UUID]):
    """An in-memory application that snapshots with the store's transcodings."""

    is_snapshotting_enabled = True

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        for transcoding in SNAPSHOT_TRANSCODINGS:
            transcoder.register(transcoding)


def memory_event_classes() -> set[type[Aggregate.Event]]:
    """Every event class ``Memory`` declares: those stored under a topic of ours (not
    the ``Event`` base the library adds to every aggregate)."""
    return {
        value
        for value in vars(Memory).values()
        if isinstance(value, type)
        and issubclass(value, Aggregate.Event)
        and get_topic(value).startswith("palimpsest:")
    }


def _state(memory: Memory) -> dict[str, Any]:
    """The aggregate's whole state, as replay must rebuild it."""
    state = {k: v for k, v in vars(memory).items() if k != "_pending_events"}
    # Class defaults (older snapshots still load) count when unset.
    for name in ("erased_by", "retracted_edges"):
        state.setdefault(name, getattr(memory, name))
    state["retracted_edges"] = list(state["retracted_edges"])
    return state


# One operation: a name and the integers it draws its arguments from.
Op = tuple[str, int, int]

OPS = (
    "version",
    "support",
    "deactivate",
    "edge",
    "retract_edge",
    "forget",
    "restore",
    "pin",
    "unpin",
    "erase_versions",
    "erase",
)

ops = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 7), st.integers(0, 7)), max_size=30)


def _apply(memory: Memory, targets: list[Memory], op: Op) -> None:
    """Apply one operation; a refused one (a domain error) must record nothing."""
    name, a, b = op
    principal = PRINCIPALS[a % len(PRINCIPALS)]
    decision = uuid4()

    def excerpts(n: int) -> tuple[Any, ...]:
        return tuple(
            cut_excerpt(OBSERVATIONS[(a + i) % len(OBSERVATIONS)], TEXT, i, i + 5 + b)
            for i in range(n)
        )

    actions: dict[str, Callable[[], object]] = {
        "version": lambda: memory.record_version(
            content_digest=f"sha256:{a % 3}",  # equal contents: erasure keeps digests
            size_bytes=a + 1,
            excerpts=excerpts(b % 3),
            principal_id=principal,
            model_id=None if a % 2 else "judge-1",
            trust=(b % 5) / 4,
        ),
        "support": lambda: memory.add_contributions(
            memory.versions[b % len(memory.versions)].version_id,
            excerpts(1 + a % 2),
            principal_id=principal,
            model_id="judge-2",
            trust=0.5,
        ),
        "deactivate": lambda: memory.deactivate_contribution(
            memory.contributions[b % len(memory.contributions)].contribution_id
            if memory.contributions
            else uuid4(),
            decision_id=decision,
            principal_id=principal,
        ),
        "edge": lambda: memory.add_edge(
            ("supersedes", "conflicts_with", "extends")[a % 3],
            targets[b % len(targets)],
            principal_id=principal,
            decision_id=decision,
        ),
        "retract_edge": lambda: memory.retract_edge(
            list(memory.edges.values())[b % len(memory.edges)] if memory.edges else uuid4(),
            decision_id=decision,
            principal_id=principal,
        ),
        "forget": lambda: memory.forget(
            ("stale", " ")[a % 2], decision_id=decision, principal_id=principal
        ),
        "restore": lambda: memory.restore(decision_id=decision, principal_id=principal),
        "pin": lambda: memory.pin(decision_id=decision, principal_id=principal),
        "unpin": lambda: memory.unpin(decision_id=decision, principal_id=principal),
        "erase_versions": lambda: memory.erase_versions(
            [v.version_id for i, v in enumerate(memory.versions) if (i + a) % 2 == 0],
            decision_id=decision,
            principal_id=principal,
        ),
        "erase": lambda: memory.erase(decision_id=decision, principal_id=principal),
    }
    before = len(memory.pending_events)
    try:
        actions[name]()
    except PalimpsestError:
        assert len(memory.pending_events) == before, f"a refused {name} recorded events"
        event(f"refused: {name}")


def _build(ops_drawn: list[Op]) -> Memory:
    memory = Memory.create(
        tenant_id=uuid4(),
        memory_type="fact",
        scope="user",
        project=None,
        topic=None,
        principal_id=PRINCIPALS[0],
    )
    memory.record_version(
        content_digest="sha256:0",
        size_bytes=1,
        excerpts=(),
        principal_id=PRINCIPALS[0],
        model_id=None,
        trust=1.0,
    )
    targets = [
        Memory.create(
            tenant_id=memory.tenant_id,
            memory_type="fact",
            scope="user",
            project=None,
            topic=None,
            principal_id=PRINCIPALS[1],
        )
        for _ in range(2)
    ]
    for op in ops_drawn:
        _apply(memory, targets, op)
    return memory


@pytest.mark.slow
def test_replay_in_any_split_rebuilds_the_same_memory_for_every_event_type() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(ops, st.lists(st.integers(0, 60), max_size=4), st.integers(1, 60))
    def replay(ops_drawn: list[Op], cuts: list[int], snapshot_at: int) -> None:
        memory = _build(ops_drawn)
        events = memory.collect_events()
        seen.update(type(e).__name__ for e in events)
        for e in {type(e).__name__ for e in events}:
            event(f"event type: {e}")
        bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
        log, plain = _Log(), Application[UUID]()
        for start, end in pairwise(bounds):
            log.save(*events[start:end])
            plain.save(*events[start:end])
        expected = _state(memory)
        assert _state(log.repository.get(memory.id)) == expected

        # From a snapshot at any version, then the events after it; and the state
        # at the snapshot's version, from the snapshot alone and from events alone.
        at = min(snapshot_at, memory.version)
        log.take_snapshot(memory.id, version=at)
        assert _state(log.repository.get(memory.id)) == expected
        assert _state(log.repository.get(memory.id, version=at)) == _state(
            plain.repository.get(memory.id, version=at)
        )

    replay()
    declared = {cls.__name__ for cls in memory_event_classes()}
    assert len(declared) >= 12
    print("memory events produced across the run:", dict(sorted(seen.items())))
    assert declared - set(seen) == set(), "event types the property never replayed"


def test_every_memory_event_is_stored_under_a_topic_of_ours() -> None:
    # The property above finds Memory's events by their topic: one without a
    # stable topic would escape it (and be stored under its class path).
    nested = {
        value
        for name, value in vars(Memory).items()
        if isinstance(value, type) and issubclass(value, Aggregate.Event) and name != "Event"
    }
    assert nested == memory_event_classes()
    assert len({get_topic(cls) for cls in nested}) == len(nested)
