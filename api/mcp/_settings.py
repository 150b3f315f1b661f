"""MCP settings, read once per process from ``PALIMPSEST_MCP_*`` variables."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["McpSettings"]


class McpSettings(BaseSettings):
    """What the MCP server advertises."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_MCP_", frozen=True, extra="ignore")

    admin_tools: bool = Field(
        default=False,
        description="Also advertise pin, unpin, restore, erase, set_retention, "
        "list_proposals and decide_proposal (the caller's role still decides what runs).",
    )
    conflict_wait_s: float = Field(
        default=1.0,
        ge=0.0,
        le=30.0,
        description="How long remember waits for the new memory's embedding to find the "
        "memories it may conflict with, before answering that they are pending (only "
        "where a drain runs to embed it).",
    )
    local_token: SecretStr | None = Field(
        default=None,
        description="A token that ``/mcp`` requests without an Authorization header act "
        "as, for local clients that cannot send one. Refused unless the service binds a "
        "loopback address.",
    )
