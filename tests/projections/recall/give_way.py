"""The rule every local embedder keeps, checked once for each: a batch (the indexing
drain's) gives way between its steps to a single text (a recall's query) being
embedded, for at most ``GIVE_WAY_S``."""

from __future__ import annotations

import threading
import time

from palimpsest.projections.recall.embedders import Embedder


def check_batch_gives_way(
    model: Embedder, release: threading.Event, steps: list[tuple[int, float]]
) -> None:
    """Embed a query that holds the model until ``release`` is set, then a batch of 40
    in steps of 16 (``steps`` records each step's size and start): no step may start
    while the query runs, and the batch must wait for the query, not for the bound."""
    query = threading.Thread(target=model.embed, args=(["what does the user prefer?"],))
    query.start()
    time.sleep(0.05)  # the query is in the model
    batch = threading.Thread(target=model.embed, args=([f"memory {i}" for i in range(40)],))
    began = time.monotonic()
    batch.start()
    time.sleep(0.1)
    assert steps == []  # not one step while the query runs
    released = time.monotonic()
    release.set()
    query.join(5)
    batch.join(5)
    assert [n for n, _ in steps] == [16, 16, 8]
    assert all(at >= released for _, at in steps)
    assert released - began < 0.25  # it was the query that held it, not the bound
