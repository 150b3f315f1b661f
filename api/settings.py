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
    raw_retention_hours: int = Field(default=30 * 24, ge=1)
    transient_retention_hours: int = Field(default=24, ge=1)
    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    cache_entries: int = Field(default=10_000, ge=0)
    """Decoded memories kept in memory for as-of reads (0 disables the cache)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
