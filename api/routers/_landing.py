"""``/``: where a person or a program that found the service goes next.

A JSON document, whatever the client accepts (a browser shows it as it is): the
service's name and version and a link to each of its entrances. It needs no
token and says nothing of any tenant, so it tells a stranger no more than the
entrances it lists do.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

import palimpsest
from palimpsest.api.mcp._http import MCP_PATH

__all__ = ["Landing", "landing", "router"]

router = APIRouter(tags=["operations"])

_LINKS = {
    "review": "/review",
    "openapi": "/openapi.json",
    "mcp": MCP_PATH,
    "readyz": "/readyz",
    "healthz": "/healthz",
    "metrics": "/metrics",
}
"""No ``/docs``: it is not served (Swagger UI would load its scripts from a CDN);
``/openapi.json`` is the reference."""


class Landing(BaseModel):
    """The service, and where to go next."""

    name: Literal["palimpsest"] = "palimpsest"
    version: str = Field(description="The version of palimpsest that answers.")
    summary: str = "Memory for LLM agents, with provenance, that forgets on purpose."
    links: dict[str, str] = Field(
        description="Each entrance by name: `review` (the page where a person reviews the "
        "forgetting pass's proposals), `openapi` (the HTTP API's reference), `mcp` (the MCP "
        "tools, with a bearer token), `readyz` and `healthz` (probes), `metrics` "
        "(Prometheus)."
    )


@router.get("/", response_model=Landing)
async def landing() -> Landing:
    """The service's name, version and entrances. No token needed; it lists no tenant's
    data."""
    return Landing(version=palimpsest.__version__, links=_LINKS)
