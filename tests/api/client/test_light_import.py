"""The client imports no part of the server: an agent developer installs it without
PostgreSQL, SQLAlchemy, dramatiq, uvicorn or torch (the base install is httpx and
pydantic). Each import runs in a fresh interpreter, which lists what it loaded."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The libraries of the server's extras (pyproject.toml), as their import names.
_SERVER_LIBRARIES = frozenset(
    {
        "alembic",
        "dramatiq",
        "eventsourcing",
        "fastapi",
        "jinja2",
        "mcp",
        "pgserver",
        "pgvector",
        "prometheus_client",
        "psycopg",
        "psycopg_pool",
        "pydantic_settings",
        "sentence_transformers",
        "sqlalchemy",
        "starlette",
        "torch",
        "uvicorn",
    }
)
# The server's rooms; palimpsest.api (a docstring) and palimpsest.api.client may load.
_SERVER_ROOMS = ("palimpsest.domain", "palimpsest.projections", "palimpsest.workers")
# Pure rules both sides read, which import the standard library only (and the face of
# their room, a docstring): the client may load these.
_SHARED = frozenset({"palimpsest.domain", "palimpsest.domain.retry_after"})


def _loaded(statement: str) -> list[str]:
    """Every module a fresh interpreter imports to run ``statement``, in order."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    # "import time: <self µs> | <cumulative µs> | <indented module name>"
    return [
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and not line.rstrip().endswith("| imported package")
    ]


def _of_the_server(module: str) -> bool:
    if module in _SHARED:
        return False
    if module.partition(".")[0] in _SERVER_LIBRARIES:
        return True
    if module.startswith(_SERVER_ROOMS):
        return True
    return module.startswith("palimpsest.api.") and not module.startswith("palimpsest.api.client")


@pytest.mark.slow
@pytest.mark.parametrize(
    "statement",
    [
        "from palimpsest import Client, AsyncClient",
        "import palimpsest; palimpsest.Client; palimpsest.AsyncClient; palimpsest.ProblemError",
        "import palimpsest.api.client.langgraph_store",
    ],
)
def test_the_client_loads_no_module_of_the_server(statement: str) -> None:
    loaded = _loaded(statement)
    assert "palimpsest.api.client._sync" in loaded  # it did import the client
    assert [module for module in loaded if _of_the_server(module)] == []
