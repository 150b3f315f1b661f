"""HTTP and write-path settings of the service."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ApiSettings"]


class ApiSettings(BaseSettings):
    """Settings read once per process from ``PALIMPSEST_*`` variables."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    """HTTP processes ``serve`` runs on the port (one of them, elected, drains)."""
    raw_retention_hours: int = Field(default=30 * 24, ge=1)
    transient_retention_hours: int = Field(default=24, ge=1)
    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    cache_entries: int = Field(default=10_000, ge=0)
    """Decoded memories kept in memory for as-of reads (0 disables the cache)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    streams_per_token: int = Field(default=20, ge=1)
    """Open ``/v1/events/stream`` streams one token may hold at once (429 beyond)."""
    streams_per_tenant: int = Field(default=200, ge=1)
    """Open event streams all of a tenant's tokens may hold at once (429 beyond)."""
    waits_per_token: int = Field(default=200, ge=1)
    """Requests of one token waiting for the drains at once (``?wait=``; 429 beyond)."""
    waits_per_tenant: int = Field(default=400, ge=1)
    """Requests of all of a tenant's tokens waiting for the drains at once (429 beyond)."""
    token_cache_s: float = Field(default=5.0, ge=0.0, le=60.0)
    """How long a verified bearer token is trusted without asking the database: a
    token revoked by another process stops working here within this bound (0: ask
    every time); one revoked by this process stops at once."""
    embedded_restart_attempts: int = Field(default=5, ge=1, le=100)
    """Failed starts in a row after which ``serve`` gives up restarting the embedded
    PostgreSQL it runs, should it stop: ``/healthz`` then answers 503, so a liveness
    probe restarts the service (it goes on trying meanwhile, at a 30 s pace)."""
    candidate_budget_ms: int = Field(default=5, ge=0, le=1000)
    """How long a write of a memory or version looks for its contradiction candidates
    before answering ``pending`` with their URL (``?candidates=wait`` waits up to
    ``PALIMPSEST_CANDIDATE_WAIT_S`` instead)."""
