"""Settings of the drain workers."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.schedule import DailySchedule, parse_daily

__all__ = ["DrainSettings", "ForgettingPassSettings"]


class DrainSettings(BaseSettings):
    """Where wake-up hints travel, and how drains pace themselves."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    broker_url: SecretStr | None = Field(default=None, validation_alias="BROKER_URL")
    drain_batch: int = Field(default=100, ge=1, le=10_000)
    sweep_interval_s: float = Field(default=1.0, gt=0, le=3600)
    drain_lease_s: float = Field(default=10.0, gt=0, le=3600)
    drain_stall_s: float = Field(default=120.0, gt=0, le=86_400)
    """With ``BROKER_URL``: how long work may wait while no worker completes a drain pass
    before ``/readyz`` answers 503 (``drains: stalled``): a worker pool that died."""
    drain_process: bool = False
    """``serve`` runs the drains (and the daily jobs beside them) in a process of their
    own, started again if it dies, instead of in a thread of an HTTP process: each
    HTTP process then drains nothing and spends its interpreter on requests only.
    Ignored with ``BROKER_URL`` (the workers drain)."""

    @field_validator("broker_url")
    @classmethod
    def _known_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(
            ("redis://", "rediss://", "amqp://", "amqps://")
        ):
            msg = "must be a redis:// or amqp:// URL"
            raise ValueError(msg)
        return value


class ForgettingPassSettings(BaseSettings):
    """Whether the scheduled forgetting pass runs, and when (seed 000).

    Off by default. On, it runs daily at ``forgetting_pass_cron`` (a daily cron
    line ``M H * * *`` in UTC), over every tenant that opted in, with the
    deployment's judge (``PALIMPSEST_JUDGE``; with none there is no pass). A run
    holds the day's claim for ``forgetting_pass_lease_s`` (renewed as it goes); a
    claim neither finished nor renewed within it (its process died, or the pass
    met an error) is claimed again by the next scheduled run.
    """

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    forgetting_pass_enabled: bool = False
    forgetting_pass_cron: str = "30 4 * * *"
    forgetting_pass_lease_s: float = Field(default=1800.0, gt=0, le=86_400)

    @field_validator("forgetting_pass_cron")
    @classmethod
    def _daily(cls, value: str) -> str:
        try:
            parse_daily(value)
        except InvalidInputError as e:
            raise ValueError(str(e)) from e
        return value

    @property
    def schedule(self) -> DailySchedule:
        """The pass's daily schedule."""
        return parse_daily(self.forgetting_pass_cron)

    @property
    def lease(self) -> timedelta:
        """How long a claim of the day holds without being renewed."""
        return timedelta(seconds=self.forgetting_pass_lease_s)
