"""Recall checks the pairs between its candidates first, then the whole lists of what it
returns: the answers are those of checking every pair of every candidate.

The store holds a cluster of restatements of one fact, every two of them a pair (the
real indexing drain finds them), some outside the candidates (another topic than the
one recalled), some settled (the newer one forgotten, so archived; joined by an
``extends`` edge; both standing; erased) and some not.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import product
from typing import TYPE_CHECKING, Any
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.recall import search as recall_search
from palimpsest.projections.recall._conflict_marks import superseding
from palimpsest.projections.recall.recalled import RecallMode
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up

if TYPE_CHECKING:
    from psycopg import Cursor

_QUESTION = "What colour is the front door painted?"

_MODES: tuple[RecallMode, ...] = ("hybrid", "vector", "text")

_COLOURS = {
    # name: (topic, how the pair with the first one is settled)
    "blue": ("house", None),  # the oldest
    "green": ("house", None),
    "red": ("garden", None),
    "white": ("garden", "forgotten"),
    "yellow": ("house", "extends"),
    "black": ("garden", "both stand"),
    "grey": ("house", "erased"),
    "orange": ("house", "forgotten"),
}


def _cluster(client: TestClient, tenant: Tenant, runtime: Runtime) -> dict[str, UUID]:
    """Each colour's memory, written in order (each later one newer), every two a pair,
    then the settlements of :data:`_COLOURS` applied against the oldest."""
    headers = tenant.headers()
    ids = {
        colour: UUID(
            remember(
                client,
                headers,
                type="fact",
                topic=topic,
                content=f"The front door is painted {colour}",
            )["id"]
        )
        for colour, (topic, _) in _COLOURS.items()
    }
    index_until_caught_up(runtime, tenant.id)
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(f'SELECT older_id, newer_id FROM "{runtime.database.schema}".conflict_marks')
        pairs = {(r["older_id"], r["newer_id"]) for r in cur.fetchall()}
    order = list(ids.values())
    assert pairs == {(a, b) for i, a in enumerate(order) for b in order[i + 1 :]}
    oldest = ids["blue"]
    for colour, (_, settled) in _COLOURS.items():
        newer = ids[colour]
        if settled == "forgotten":
            forgot = post(client, f"/v1/memories/{newer}/forget", {"reason": "wrong"}, headers)
            assert forgot.status_code == 201, forgot.text
        elif settled == "extends":
            edge = {"kind": "extends", "target_id": str(oldest)}
            assert post(client, f"/v1/memories/{newer}/edges", edge, headers).status_code == 201
        elif settled == "both stand":
            stood = post(
                client,
                f"/v1/memories/{newer}/candidates/{oldest}/settle",
                {"resolution": "both_stand", "reason": "two doors"},
                headers,
            )
            assert stood.status_code == 201, stood.text
        elif settled == "erased":
            body = {"reason": "asked", "memory_ids": [str(newer)]}
            assert post(client, "/v1/erasures", body, headers).status_code == 201
    index_until_caught_up(runtime, tenant.id)
    return ids


def _answers(
    runtime: Runtime, tenant: Tenant, queries: list[RecallQuery], now: datetime
) -> list[list[dict[str, Any]]]:
    """Every field of every answer to each of ``queries``."""
    return [
        [
            item.model_dump()
            for item in recall(runtime.log, runtime.embedder, tenant.id, q, now=now).items
        ]
        for q in queries
    ]


def test_recall_answers_as_when_it_checked_every_pair_of_every_candidate(
    client: TestClient, tenant: Tenant, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the cluster of restatements, settled and not
    ids = _cluster(client, tenant, runtime)
    # Each answer stamps an access on what it returns, which would change the next
    # answer's salience: the answers compared are read without stamps.
    monkeypatch.setattr(recall_search, "stamp_accesses", lambda *args: None)
    queries = [
        RecallQuery(
            text=_QUESTION,
            k=k,
            offset=offset,
            mode=mode,
            topic=topic,
            include_archived=archived,
        )
        for (k, offset), mode, topic, archived in product(
            ((10, 0), (1, 0), (2, 1)), _MODES, (None, "house"), (False, True)
        )
    ]
    now = datetime.now(UTC)
    # When recall answers them, then answers them again checking every pair of every
    # candidate (as it did before: each candidate's whole list read with its state)
    answers = _answers(runtime, tenant, queries, now)

    def every_pair(
        cur: Cursor[Any], schema: str, memory_ids: list[UUID], among: list[UUID] | None = None
    ) -> dict[UUID, list[UUID]]:
        return superseding(cur, schema, memory_ids)

    monkeypatch.setattr(recall_search, "superseding", every_pair)
    # Then the answers are the same, order and every field
    assert _answers(runtime, tenant, queries, now) == answers
    # And they hold what the cluster says: the oldest is marked by its unsettled newer
    # ones only, newest first, the one of another topic (never a candidate there)
    # included, and ranks below the newer one recalled with it
    house = answers[queries.index(RecallQuery(text=_QUESTION, topic="house"))]
    found = [item["id"] for item in house]
    assert ids["red"] not in found and found.index(ids["green"]) < found.index(ids["blue"])
    assert house[found.index(ids["blue"])]["possibly_superseded_by"] == [ids["red"], ids["green"]]
    # A forgotten newer one is recalled when asked for, yet supersedes nothing, as an
    # erased one
    everything = answers[queries.index(RecallQuery(text=_QUESTION, include_archived=True))]
    assert {ids["white"], ids["orange"]} <= {item["id"] for item in everything}
    gone = {ids["white"], ids["orange"], ids["grey"]}
    assert not any(gone & set(item["possibly_superseded_by"]) for a in answers for item in a)
