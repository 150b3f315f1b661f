"""Settings of embeddings, recall and contradiction candidates."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from palimpsest.domain.errors import ConfigurationError
from palimpsest.projections.recall._onnx_minilm import (
    OnnxMiniLM,
    default_cache_dir,
    missing_onnx_model,
)
from palimpsest.projections.recall.embedders import (
    Embedder,
    LocalMiniLM,
    OpenAICompatibleEmbedder,
    missing_local_model,
)

__all__ = [
    "DEFAULT_CONFLICT_FLOOR",
    "EmbeddingSettings",
]

DEFAULT_CONFLICT_FLOOR = 0.50
"""Similarity at or above which a same-type, same-scope memory is a potential
contradiction (docs/candidates.md says why this value)."""


class EmbeddingSettings(BaseSettings):
    """Which embedder to use, and the thresholds that read its similarities."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    embedder: Literal["local", "local-onnx", "http"] | None = None
    """``local``: the local model on torch; ``local-onnx``: the same model (the same
    vectors) on onnxruntime; ``http``: an OpenAI-compatible endpoint. Unset: the local
    model, on onnxruntime when the ``onnx`` extra is installed (a query's embedding in
    about a third of torch's time), else on torch (:attr:`chosen_embedder`). The two
    runtimes record the same model id and compute the same vectors, so whichever is
    chosen reads an index the other built."""
    embedding_url: str | None = None
    """Base URL of an OpenAI-compatible endpoint (``embedder=http``)."""
    embedding_model: str | None = None
    embedding_dimension: int = Field(default=384, ge=2, le=2000)
    embedding_api_key: SecretStr | None = None
    embedding_batch: int = Field(default=64, ge=1, le=2048)
    embedding_threads: int = Field(default=1, ge=1, le=256)
    """CPU threads the local model uses (torch's intra-op threads, for the process;
    with ``local-onnx``, a batch's onnxruntime threads, a single text always taking
    one). One by default: the model shares the machine with PostgreSQL and the HTTP
    server, and a second thread that must wait for a busy core made a query's
    embedding several times slower, where one thread slowed it little
    (docs/recall.md, "Embedders"). More speeds a bulk ``palimpsest reindex`` on an
    idle machine."""
    embedding_cache_dir: Path = Field(default_factory=default_cache_dir)
    """Where ``embedder=local-onnx`` keeps the model it exported to ONNX (once per
    version of the weights' package)."""
    conflict_floor: float = Field(default=DEFAULT_CONFLICT_FLOOR, ge=0.0, le=1.0)
    candidate_wait_s: float = Field(default=1.0, ge=0.0, le=30.0)
    """How long a write waits for its version's embedding before answering that
    its potential contradictions are pending."""

    @model_validator(mode="after")
    def _http_needs_an_endpoint(self) -> EmbeddingSettings:
        if self.embedder == "http" and not (self.embedding_url and self.embedding_model):
            msg = "PALIMPSEST_EMBEDDER=http needs PALIMPSEST_EMBEDDING_URL and _MODEL"
            raise ValueError(msg)
        return self

    @property
    def chosen_embedder(self) -> Literal["local", "local-onnx", "http"]:
        """The embedder :meth:`make_embedder` builds: :attr:`embedder` when set, else
        ``local-onnx`` when its extra is installed, else ``local``."""
        if self.embedder is not None:
            return self.embedder
        return "local-onnx" if missing_onnx_model() is None else "local"

    def make_embedder(self) -> Embedder:
        """Return the configured embedder (the local model loads on first use).

        Raises:
            ConfigurationError: a local embedder is chosen and its extra is not
                installed (``palimpsest-memory[local]``: torch, sentence-transformers,
                the weights; ``[onnx]`` adds onnxruntime, onnx and tokenizers).
        """
        chosen = self.chosen_embedder
        if chosen == "http":
            assert self.embedding_url is not None and self.embedding_model is not None
            key = self.embedding_api_key
            return OpenAICompatibleEmbedder(
                self.embedding_url,
                self.embedding_model,
                self.embedding_dimension,
                api_key=key.get_secret_value() if key else None,
                batch_size=self.embedding_batch,
            )
        if chosen == "local-onnx":
            if (missing := missing_onnx_model()) is not None:
                raise ConfigurationError(missing)
            return OnnxMiniLM(
                cache_dir=self.embedding_cache_dir,
                batch_size=self.embedding_batch,
                threads=self.embedding_threads,
            )
        if (missing := missing_local_model()) is not None:
            raise ConfigurationError(missing)
        return LocalMiniLM(batch_size=self.embedding_batch, threads=self.embedding_threads)
