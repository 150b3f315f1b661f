"""A real server to fuzz: uvicorn on loopback over a runtime, with a tenant's token.

Shared by ``tests/api/test_fuzz.py`` (the bounded run in the default suite)
and ``tests/benchmarks/fuzz.py`` (the on-demand run of 10,000+ cases).
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import requests
import schemathesis

from palimpsest.api._cursor import decode_cursor
from palimpsest.api._settings import ApiSettings
from palimpsest.api._specs import memory_spec
from palimpsest.api.app import create_app
from palimpsest.api.schemas import MemoryCreate
from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.memory import Memory
from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands._spec import WriteSpec
from palimpsest.projections.commands.consolidation import ProposeMergeSpec
from palimpsest.projections.commands.proposals import ProposeSpec
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.aggregates import aggregates_of
from tests.api.live_server import live_server

__all__ = [
    "FuzzTarget",
    "drop_unissued_cursor",
    "fuzz_config",
    "move_future_capture_times_to_the_past",
    "open_proposals_of_every_kind",
    "serve_for_fuzzing",
    "use_a_seeded_proposal",
]


@dataclass
class FuzzTarget:
    """The server under fuzzing: its schema, a tenant's admin token, one HTTP session."""

    base_url: str
    token: str
    schema: schemathesis.BaseSchema
    session: requests.Session
    headers: dict[str, str] = field(init=False)
    cases: int = 0
    """Requests sent by the fuzzing test (its figures for docs/fuzzing.md)."""
    failed: int = 0
    """Of those, the ones that failed a check (shrinking repeats a failure)."""
    statuses: Counter[int] = field(default_factory=Counter)
    """The status codes of the responses that passed every check."""
    proposals: list[UUID] = field(default_factory=list)
    """The tenant's seeded proposals, one open per kind (a person could have each)."""
    proposal_turns: int = 0
    """How many cases were pointed at a seeded proposal (each takes the next)."""

    def __post_init__(self) -> None:
        self.headers = {"Authorization": f"Bearer {self.token}"}


def fuzz_config(token: str) -> schemathesis.Config:
    """Every check, as configured for this API's documented protocol, with
    ``token`` as the bearer credentials of the ``HTTPBearer`` scheme (so that
    the cases schemathesis sends without them really go without).

    The one adjustment to a check: a schema-valid request may also be
    answered 428 ``confirmation-required``: a destructive request (deleting
    the tenant) answers it until it carries the confirmation token the 428
    hands out, which a generator cannot know. Nothing else is added: in
    particular a schema-valid request answered 422 is a failure, since it
    means the OpenAPI document accepts what the service refuses.

    The event stream never ends on its own (it follows the log, with a
    heartbeat every 15 s), so the fuzzer reads each response for at most one
    event or two seconds, as a client that disconnects would.
    """
    return schemathesis.Config.from_dict(
        {
            "auth": {"openapi": {"HTTPBearer": {"bearer": token}}},
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2XX", "3XX", 401, 403, 404, 409, 428, 429, "5XX"],
                },
            },
            "operations": [
                {
                    "include-path": "/v1/events/stream",
                    "max-stream-events": 1,
                    "request-timeout": 2,
                },
            ],
        }
    )


def drop_unissued_cursor(case: schemathesis.Case[Any]) -> None:
    """Drop a ``cursor`` query parameter the service never issued.

    A cursor is an opaque token that only a listing hands out (like the
    confirmation token above); any string matches its schema, and a made-up
    one is refused 422 ``invalid-input`` as documented. The refusal itself is
    tested in tests/api/test_list.py. (Done on the case, not in a
    ``map_query`` hook: the coverage phase's cases bypass hooks.)
    """
    if isinstance(case.query, dict) and "cursor" in case.query:
        try:
            decode_cursor(str(case.query["cursor"]))
        except InvalidInputError:
            del case.query["cursor"]
    # Recall's cursor (in its body) is bound to the recall that issued it: a
    # well-formed generated one never is (a malformed one is the schema's to refuse).
    # Its refusal is tested in tests/api/test_recall_hybrid.py.
    body = case.body
    cursor = body.get("cursor") if isinstance(body, dict) and "query" in body else None
    well_formed = isinstance(cursor, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,200}", cursor)
    if isinstance(body, dict) and well_formed:
        del body["cursor"]


_PAST = "2000-01-01T00:00:00Z"


def move_future_capture_times_to_the_past(case: schemathesis.Case[Any]) -> None:
    """Replace a well-formed ``captured_at`` later than now with a past time.

    An observation cannot have been captured after the service received it
    (beyond the clock skew): refused 422 ``invalid-input``, as its field's
    description says. The rule depends on the server's clock, which no JSON
    Schema can state, and a generator cannot know (like the confirmation
    token and the cursors above). The refusal itself is tested in
    tests/api/test_truthful_schema.py. Any other value, valid or not, is sent
    as generated.
    """
    bodies = [case.body] if isinstance(case.body, dict) else []
    for body in list(bodies):
        items = body.get("items")
        if isinstance(items, list):
            bodies += [item for item in items if isinstance(item, dict)]
    now = datetime.now(UTC)
    for body in bodies:
        value = body.get("captured_at")
        if not isinstance(value, str):
            continue
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            continue
        if when.tzinfo is not None and when > now:
            body["captured_at"] = _PAST


def open_proposals_of_every_kind(runtime: Runtime, token: str) -> list[UUID]:
    """Give the token's tenant an open proposal of every kind a person can apply
    (archive, supersede, conflict, decay, merge), about memories of its own, and
    return their ids: a route about a proposal is only fuzzed for real against one
    that exists (a made-up id answers 404 before the body is read)."""
    caller = authenticate(runtime.log, token)
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    writer = Writer(runtime.log, policy, clock=lambda: datetime.now(UTC))

    def write(spec: WriteSpec) -> dict[str, Any]:
        return writer.write(caller, [spec], batch=False).body

    facts = [
        f"The build server for team {n} is in rack {n}." for n in ("a", "b", "c", "d", "e", "f")
    ]
    ids = [UUID(str(write(_memory_spec(text))["id"])) for text in [*facts, facts[0], facts[0]]]

    def propose(verdict: str, memory_id: UUID, related: UUID | None = None) -> UUID:
        spec = ProposeSpec(
            memory_id=memory_id,
            verdict=verdict,
            related_memory_id=related,
            probability=0.99,
            distribution=None,
            model="operator:fuzz",
            run_id=uuid4(),
            dismissed=False,
        )
        return UUID(str(write(spec)["id"]))

    loaded = aggregates_of(runtime.log, caller.tenant_id, ids[6:])
    seen = tuple(
        (memory_id, memory.current_version.version_id)
        for memory_id, memory in loaded.items()
        if isinstance(memory, Memory)
    )
    merge = ProposeMergeSpec(seen, facts[0], "extractive", uuid4(), similarity=1.0)
    return [
        propose("archive", ids[0]),
        propose("supersede", ids[1], ids[2]),
        propose("conflict", ids[3], ids[4]),
        propose("decay", ids[5]),
        UUID(str(write(merge)["id"])),
    ]


def _memory_spec(text: str) -> WriteSpec:
    return memory_spec(MemoryCreate(type="fact", scope="user", content=text))


def use_a_seeded_proposal(case: schemathesis.Case[Any], target: FuzzTarget) -> None:
    """Point a well-formed ``proposal_id`` at one of the seeded proposals, in turn.

    Like the cursors above: a made-up id is well formed and answers 404 before the
    body is read, so the body's rules against each kind of proposal would never be
    tried (a ``resolution`` on a non-conflict proposal went unseen so). An id that
    breaks the schema is sent as generated.
    """
    params = case.path_parameters
    if not target.proposals or not isinstance(params, dict) or "proposal_id" not in params:
        return
    try:
        UUID(str(params["proposal_id"]))
    except ValueError:
        return
    params["proposal_id"] = str(target.proposals[target.proposal_turns % len(target.proposals)])
    target.proposal_turns += 1


@contextmanager
def serve_for_fuzzing(runtime: Runtime) -> Iterator[FuzzTarget]:
    """Serve the API over ``runtime`` on a free loopback port, with the in-process
    drain loop running (as ``palimpsest serve`` does), for a fresh tenant."""
    runtime.load_embedder()  # as `serve` does before it answers ready
    loop = DrainLoop(runtime.log, sweep_s=0.5, embedder=runtime.embedder)
    loop.start()
    app = create_app(ApiSettings(), runtime, loop.wake, drains_running=lambda: loop.running)
    try:
        with live_server(app) as base_url:
            # Fuzz a ready server: a 503 from /readyz before then is its documented answer.
            deadline = time.monotonic() + 30
            while requests.get(f"{base_url}/readyz", timeout=10).status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError("the fuzzing server did not become ready")
                time.sleep(0.1)
            issued = create_tenant(runtime.log, f"fuzz-{uuid.uuid4().hex[:8]}")
            schema = schemathesis.openapi.from_url(
                f"{base_url}/openapi.json", timeout=30, config=fuzz_config(issued.token)
            )
            with requests.Session() as session:
                target = FuzzTarget(base_url, issued.token, schema, session)
                target.proposals = open_proposals_of_every_kind(runtime, issued.token)
                yield target
    finally:
        loop.stop()
