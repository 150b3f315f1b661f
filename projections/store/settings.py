"""Where the database is, and how the service connects to it."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DatabaseSettings", "default_data_dir"]


def default_data_dir() -> Path:
    """Return the embedded data directory used when none is configured.

    pgserver, run as root, makes every ancestor of its data directory
    world-readable (research/stack.md §1.1), so root gets the conventional
    system location ``/var/lib/palimpsest`` rather than a path under ``/root``.
    Everyone else gets their user data directory.
    """
    if os.geteuid() == 0:
        return Path("/var/lib/palimpsest")
    return Path(platformdirs.user_data_dir("palimpsest", appauthor=False))


class DatabaseSettings(BaseSettings):
    """Database settings, read once per process from the environment.

    With no ``DATABASE_URL`` the embedded PostgreSQL in ``data_dir`` is used.
    ``DATABASE_URL`` names the owner role, which runs migrations; the service
    itself connects as ``app_role``, which owns nothing and cannot delete
    canonical rows.
    """

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    database_url: SecretStr | None = Field(default=None, validation_alias="DATABASE_URL")
    data_dir: Path = Field(default_factory=default_data_dir)
    db_schema: str = Field(default="palimpsest", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    db_app_role: str = Field(default="palimpsest_app", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    db_app_password: SecretStr | None = None
    db_pool_size: int = Field(default=4, ge=1, le=64)
    db_max_overflow: int = Field(default=8, ge=0, le=256)
    db_lock_timeout_s: int = Field(default=10, ge=0, le=600)
    db_wait_s: int = Field(default=5, ge=1, le=120)
    """How long a request waits for a database connection before it answers 503
    ``database-unavailable`` (a write tries three times: docs/configuration.md)."""
    embedded_shared_buffers_mb: int = Field(default=512, ge=16, le=65536)
    """The embedded server's ``shared_buffers``: recall's HNSW index inserts and
    searches touch the graph at random, and it should fit (docs/benchmarks.md)."""

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            msg = "must start with postgresql:// (or postgres://)"
            raise ValueError(msg)
        return value

    @property
    def embedded(self) -> bool:
        """Whether the embedded PostgreSQL in ``data_dir`` is used."""
        return self.database_url is None
