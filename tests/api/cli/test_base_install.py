"""The command line on the base install (the client only, no ``server`` extra): a fresh
interpreter in which importing any of the server's libraries fails, as it would
where they are not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import palimpsest
from palimpsest.api.cli import EXIT_OK, EXIT_USAGE

# The server extra's libraries (pyproject.toml), as their import names.
_SERVER_LIBRARIES = (
    "alembic",
    "dramatiq",
    "eventsourcing",
    "fastapi",
    "jinja2",
    "mcp",
    "pgserver",
    "pgvector",
    "platformdirs",
    "prometheus_client",
    "psutil",
    "psycopg",
    "psycopg_pool",
    "pydantic_settings",
    "sqlalchemy",
    "starlette",
    "uvicorn",
)

_BLOCKER = f"""
import sys

class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {set(_SERVER_LIBRARIES)!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.fixture
def base_install(tmp_path: Path) -> dict[str, str]:
    """The environment of an interpreter that cannot import the server's libraries."""
    (tmp_path / "sitecustomize.py").write_text(_BLOCKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALIMPSEST_", "DATABASE_"))}
    env |= {"PYTHONPATH": str(tmp_path), "PALIMPSEST_DATA_DIR": str(tmp_path / "store")}
    # The stand-in holds: the server's libraries cannot be imported there.
    blocked = subprocess.run(
        [sys.executable, "-c", "import sqlalchemy"], env=env, capture_output=True, check=False
    )
    assert blocked.returncode != 0 and b"ModuleNotFoundError" in blocked.stderr
    return env


def _palimpsest(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "palimpsest", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_and_help_work_without_the_server(base_install: dict[str, str]) -> None:
    done = _palimpsest(base_install, "--version")
    assert done.returncode == EXIT_OK, done.stderr
    assert done.stdout == f"palimpsest {palimpsest.__version__}\n"
    done = _palimpsest(base_install, "--help")
    assert done.returncode == EXIT_OK and "serve" in done.stdout


@pytest.mark.parametrize(
    "verb",
    [["serve"], ["config"], ["tenant", "list"], ["mcp"], ["migrate"], ["token", "path"]],
)
def test_a_verb_without_the_server_names_the_extra_to_install(
    base_install: dict[str, str], verb: list[str]
) -> None:
    done = _palimpsest(base_install, *verb)
    assert done.returncode == EXIT_USAGE
    [line] = done.stderr.splitlines()
    assert line.startswith("palimpsest: error: ")
    assert "pip install 'palimpsest-memory[embedded]'" in line and "[server]" in line
    assert done.stdout == ""
