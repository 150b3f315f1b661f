"""Possible supersessions: the pairs the indexing drain finds, and how recall orders them.

The pairs are written by the real indexing drain (real model) into PostgreSQL;
their orientation follows the versions, not the memories' creation; a settled
pair (both stand, another edge, the newer one forgotten) supersedes nothing; a
dismissal is found by its logical key, which the SQL computes as the domain does.
"""

from __future__ import annotations

from uuid import UUID

from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.decision import dismissal_key
from palimpsest.projections.recall._conflict_marks import (
    _DISMISSAL_KEY,
    conflicts_first,
    superseding,
)
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up


def _pairs(runtime: Runtime, tenant: Tenant) -> set[tuple[str, str]]:
    """The tenant's stored pairs, (older, newer)."""
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(f'SELECT older_id, newer_id FROM "{runtime.database.schema}".conflict_marks')
        return {(str(r["older_id"]), str(r["newer_id"])) for r in cur.fetchall()}


def test_the_dismissal_key_in_sql_is_the_domain_s(runtime: Runtime, tenant: Tenant) -> None:
    # Ids whose text orders differently from their bytes or numbers, either way round.
    ids = [UUID(int=n) for n in (1, 2**127, 2**128 - 1)] + [
        UUID("0a000000-0000-4000-8000-000000000000"),
        UUID("a0000000-0000-4000-8000-000000000000"),
        UUID("9fffffff-ffff-4fff-bfff-ffffffffffff"),
    ]
    query = (
        f"SELECT {_DISMISSAL_KEY} AS key FROM (SELECT %s::uuid AS older_id, %s::uuid AS newer_id) k"
    )
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        for a in ids:
            for b in ids:
                cur.execute(query.replace("{{", "{").replace("}}", "}"), (a, b))
                row = cur.fetchone()
                assert row is not None and row["key"] == dismissal_key(a, b), (a, b)


def test_only_unsettled_pairs_supersede(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given four pairs of near restatements (each older, then newer)
    headers = tenant.headers()
    pairs = {
        name: (
            remember(client, headers, scope=name, content=f"The {name} is blue")["id"],
            remember(client, headers, scope=name, content=f"The {name} is now green")["id"],
        )
        for name in ("door", "fence", "shed", "gate")
    }
    index_until_caught_up(runtime, tenant.id)
    assert _pairs(runtime, tenant) == set(pairs.values())
    # When three are settled: both stand, an extends edge, the newer one forgotten
    door, fence, shed, gate = (pairs[n] for n in ("door", "fence", "shed", "gate"))
    stood = post(
        client,
        f"/v1/memories/{door[1]}/candidates/{door[0]}/settle",
        {"resolution": "both_stand", "reason": "two doors"},
        headers,
    )
    assert stood.status_code == 201, stood.text
    edge = {"kind": "extends", "target_id": fence[0]}
    assert post(client, f"/v1/memories/{fence[1]}/edges", edge, headers).status_code == 201
    forgot = post(client, f"/v1/memories/{shed[1]}/forget", {"reason": "wrong"}, headers)
    assert forgot.status_code == 201
    index_until_caught_up(runtime, tenant.id)
    # Then only the unsettled one supersedes its older memory
    olders = [UUID(p[0]) for p in pairs.values()]
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        found = superseding(cur, runtime.database.schema, olders)
    assert found == {UUID(gate[0]): [UUID(gate[1])]}


def test_pairs_follow_versions_and_go_with_erasure(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    dark = remember(client, headers, type="preference", content="The user prefers dark mode")["id"]
    light = remember(client, headers, type="preference", content="The user now prefers light mode")[
        "id"
    ]
    index_until_caught_up(runtime, tenant.id)
    assert _pairs(runtime, tenant) == {(dark, light)}
    # A new version of the older memory makes it the newer one.
    post(
        client,
        f"/v1/memories/{dark}/versions",
        {"content": "The user prefers dark mode again"},
        headers,
    )
    index_until_caught_up(runtime, tenant.id)
    assert _pairs(runtime, tenant) == {(light, dark)}
    # Erasing one side leaves no pair once the drain has handled it.
    erased = post(client, "/v1/erasures", {"reason": "asked", "memory_ids": [dark]}, headers)
    assert erased.status_code == 201, erased.text
    index_until_caught_up(runtime, tenant.id)
    assert _pairs(runtime, tenant) == set()


_FILLER = (
    "Bought {n} apples at the market",
    "The printer on floor {n} jams again",
    "Book club picked novel number {n}",
    "Parking spot {n} is reserved for visitors",
)


def test_in_a_larger_tenant_shared_rare_words_pair_what_meaning_alone_misses(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a tenant with enough memories for its word counts to tell rare from common
    headers = tenant.headers()
    for n in range(6):
        for line in _FILLER:
            remember(client, headers, type="note", content=line.format(n=n))
    index_until_caught_up(runtime, tenant.id)
    # And three pairs of long turns, each about 0.33-0.36 similar: two updates of one
    # fact sharing its rare words, one pair of compatible tastes sharing none
    turns = {
        "gym": (
            "Thanks for the sourdough tips! Unrelated, but I have been going to the Riverside "
            "climbing gym twice a week and my shoulders are sore. Any stretches for after "
            "bouldering?",
            "Could you help me plan meals for a busy week? I now go to the Riverside climbing "
            "gym four times a week, so I need more protein.",
        ),
        "commute": (
            "Can you recommend a podcast for my commute? I drive forty minutes to the Halden "
            "office every day.",
            "What should I cook tonight? Since the Halden office went remote I no longer "
            "drive forty minutes each day.",
        ),
        "art": (
            "I'm drawn to cubism for its unique way of breaking down objects into geometric "
            "shapes.",
            "Abstract expressionism moves me through its emphasis on emotion and spontaneous "
            "creation.",
        ),
    }
    ids = {
        (name, side): remember(client, headers, type="fact", content=text)["id"]
        for name, pair in turns.items()
        for side, text in zip(("older", "newer"), pair, strict=True)
    }
    # When the drain indexes them
    index_until_caught_up(runtime, tenant.id)
    # Then the updates are pairs, older to newer, and the tastes are not
    assert _pairs(runtime, tenant) == {
        (ids[(name, "older")], ids[(name, "newer")]) for name in ("gym", "commute")
    }


_IDS = [UUID(int=n) for n in range(8)]


@st.composite
def _rankings(draw: st.DrawFn) -> tuple[list[UUID], dict[UUID, list[UUID]], set[UUID]]:
    """An order of distinct memories, pairs oriented by id (higher is newer), and the
    memories that hold every word of the query."""
    ordered = draw(st.permutations(_IDS).map(lambda p: p[: draw(st.integers(0, len(_IDS)))]))
    newer: dict[UUID, list[UUID]] = {}
    for older in ordered:
        later = [m for m in _IDS if m.int > older.int]
        newer[older] = draw(st.lists(st.sampled_from(later), unique=True)) if later else []
    return list(ordered), newer, set(draw(st.lists(st.sampled_from(_IDS))))


@given(_rankings())
def test_each_memory_follows_the_newer_ones_it_yields_to(
    ranking: tuple[list[UUID], dict[UUID, list[UUID]], set[UUID]],
) -> None:
    ordered, newer, every_word = ranking

    def yields(older: UUID, new: UUID) -> bool:
        return not (older in every_word and new not in every_word)

    out = conflicts_first(ordered, lambda m: m, lambda m: newer[m], yields)
    assert sorted(out) == sorted(ordered)  # a reordering, nothing lost or repeated
    for older in ordered:
        for new in newer[older]:
            if new in ordered and yields(older, new):
                assert out.index(new) < out.index(older)
    # Without pairs, the order is the ranking's.
    assert conflicts_first(ordered, lambda m: m, lambda m: [], yields) == ordered
