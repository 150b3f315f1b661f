"""Recall's remembered query vectors: a repeated query is not embedded again."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.projections.recall.embedders import LocalMiniLM
from palimpsest.projections.recall.query_vectors import _CACHES, QueryVectors, query_vectors
from tests.projections.recall.give_way import check_batch_gives_way

TENANT = uuid4()


class _Counting:
    """An embedder that counts the texts it embeds (a vector per text's length)."""

    model_id = "counting"
    dimension = 2

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [[float(len(t)), 1.0] for t in texts]


def test_a_repeated_query_is_embedded_once() -> None:
    embedder = _Counting()
    cache = QueryVectors(size=8)
    first = cache.vector(embedder, TENANT, "what does the user prefer?")
    again = cache.vector(embedder, TENANT, "what does the user prefer?")
    assert first == again
    assert embedder.embedded == ["what does the user prefer?"]
    assert cache.figures() == {"entries": 1, "hits": 1, "misses": 1}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcdefgh"), max_size=60), st.integers(1, 5))
def test_the_cache_holds_the_most_recent_queries_and_no_more(queries: list[str], size: int) -> None:
    # A model: the queries embedded are exactly the misses of an LRU of ``size``.
    embedder = _Counting()
    cache = QueryVectors(size=size)
    held: list[str] = []
    expected: list[str] = []
    for q in queries:
        assert cache.vector(embedder, TENANT, q) == [1.0, 1.0]
        if q in held:
            held.remove(q)
        else:
            expected.append(q)
        held.append(q)
        del held[:-size]
    assert embedder.embedded == expected
    assert cache.figures()["entries"] == len(held)


class _Model384(_Counting):
    """A vector of the real model's size per text, distinct per text."""

    dimension = 384

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [[len(t) + i / 1000 for i in range(384)] for t in texts]


def _walked_by_a_full_collection() -> int:
    """The references a full collection of the garbage collector walks (it visits each
    reference of every object it tracks)."""
    gc.collect()
    return sum(len(gc.get_referents(o)) for o in gc.get_objects())


def test_a_full_cache_adds_little_for_the_garbage_collector_to_walk() -> None:
    # A full cache of lists held 393,216 floats the collector walked in every full
    # collection of a serving process: 10-22 ms added to whichever request it landed in.
    embedder = _Model384()
    cache = QueryVectors(size=256)
    before = _walked_by_a_full_collection()
    for n in range(256):
        cache.vector(embedder, TENANT, f"question {n}")
    added = _walked_by_a_full_collection() - before
    assert cache.figures()["entries"] == 256
    assert added < 256 * 16  # the key and the entry, not the 384 numbers
    # The numbers are the model's own, exactly, on a hit as on the miss.
    assert cache.vector(embedder, TENANT, "question 7") == embedder.embed(["question 7"])[0]


def test_each_tenant_has_its_own_queries_and_loses_them_to_eviction() -> None:
    embedder = _Counting()
    cache = QueryVectors(size=8)
    other = uuid4()
    cache.vector(embedder, TENANT, "q")
    cache.vector(embedder, other, "q")  # the same text: embedded again, for this tenant
    assert embedder.embedded == ["q", "q"]
    assert cache.evict(TENANT) == 1
    cache.vector(embedder, other, "q")
    cache.vector(embedder, TENANT, "q")
    assert embedder.embedded == ["q", "q", "q"]


def test_each_embedder_has_its_own_cache_gone_with_it() -> None:
    one, other = _Counting(), _Counting()
    query_vectors(one).vector(one, TENANT, "q")
    query_vectors(other).vector(other, TENANT, "q")
    assert one.embedded == other.embedded == ["q"]  # a new model embeds for itself
    kept = len(_CACHES)
    del one
    gc.collect()
    assert len(_CACHES) == kept - 1  # an embedder's vectors go with it


def test_the_local_model_gives_a_query_the_vector_it_gives_a_batch() -> None:
    # A recall's query goes through the model's modules one text at a time; its
    # vector must be the one indexing stored for the same text in a batch.
    model = LocalMiniLM()
    texts = ["The user prefers light mode now.", "Where does the user live?"]
    batch = model.embed(texts)
    for text, vector in zip(texts, batch, strict=True):
        single = model.embed([text])[0]
        assert max(abs(a - b) for a, b in zip(single, vector, strict=True)) < 1e-5


class _SlowQueryModel:
    """Stands in for the sentence-transformers model: a single text takes until the test
    releases it; each batch step is recorded with the time it began."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.steps: list[tuple[int, float]] = []

    def preprocess(self, texts: list[str]) -> dict[str, int]:
        return {"n": len(texts)}

    def __call__(self, features: dict[str, int]) -> dict[str, Any]:
        assert self.release.wait(5)
        return {"sentence_embedding": torch.zeros(features["n"], 384)}

    def encode(self, texts: list[str], **_: object) -> Any:
        self.steps.append((len(texts), time.monotonic()))
        return np.zeros((len(texts), 384))


def test_a_batch_gives_way_to_a_query_between_its_steps() -> None:
    # The indexing drain's batch and a recall's query share the cores: the batch
    # waits between steps of 16 while a query is being embedded, at most 250 ms.
    model = LocalMiniLM(step=16)
    fake = _SlowQueryModel()
    model._model = fake
    check_batch_gives_way(model, fake.release, fake.steps)
