"""The command line's habits (issue 42): a verb opens only a store that exists, serve
checks its port first, every verb explains itself, and failures are one line."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql
from psycopg.errors import UndefinedTable

import palimpsest
from palimpsest.api.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from palimpsest.projections.runtime import Runtime
from tests.projections.drains.killing import database_url


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _no_settings() -> dict[str, str]:
    """This process's environment without a setting of palimpsest's or a database."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PALIMPSEST_", "DATABASE_"))}


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith(("PALIMPSEST_", "DATABASE_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "verb",
    [
        ["tenant", "list"],
        ["tenant", "create", "acme"],
        ["token", "list", "--tenant", "acme"],
        ["verify"],
        ["replay", "--at-position", "0"],
    ],
)
def test_a_verb_on_a_directory_without_a_store_is_refused_and_creates_nothing(
    tmp_path: Path, no_settings: None, capsys: pytest.CaptureFixture[str], verb: list[str]
) -> None:
    typo = tmp_path / "typo"
    code, out, err = _run(capsys, "--data-dir", str(typo), *verb)
    assert code == EXIT_USAGE and out == ""
    [line] = err.splitlines()
    assert line.startswith("palimpsest: error: ") and str(typo) in line
    assert not typo.exists()
    # A directory that exists but holds no store is refused alike, and left empty
    typo.mkdir()
    code, _, err = _run(capsys, "--data-dir", str(typo), *verb)
    assert code == EXIT_USAGE and err.count("\n") == 1
    assert list(typo.iterdir()) == []


def test_mcp_on_a_directory_without_a_store_is_refused_and_creates_nothing(
    tmp_path: Path,
) -> None:
    typo = tmp_path / "typo"
    token = f"pal_{uuid.uuid4().hex}_{'s' * 43}"
    done = subprocess.run(
        [sys.executable, "-m", "palimpsest", "--data-dir", str(typo), "mcp"],
        env=_no_settings() | {"PALIMPSEST_TOKEN": token},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_USAGE and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("palimpsest: error: ") and str(typo) in line
    assert not typo.exists()


@pytest.fixture
def schema_name(runtime: Runtime) -> Iterator[str]:
    """A schema name of the test's database that holds nothing yet (dropped after)."""
    name = f"habits_{uuid.uuid4().hex[:8]}"
    yield name
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _schema_exists(runtime: Runtime, name: str) -> bool:
    with runtime.database.owner_connection() as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()
    return found is not None


def test_a_verb_on_a_database_without_the_schema_is_refused_and_only_migrate_creates_it(
    runtime: Runtime,
    schema_name: str,
    monkeypatch: pytest.MonkeyPatch,
    no_settings: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url(runtime))
    monkeypatch.setenv("PALIMPSEST_DB_SCHEMA", schema_name)
    code, out, err = _run(capsys, "tenant", "list")
    assert code == EXIT_USAGE and out == ""
    [line] = err.splitlines()
    assert line.startswith("palimpsest: error: ") and schema_name in line
    assert not _schema_exists(runtime, schema_name)
    # migrate creates it, and then the verb runs
    assert _run(capsys, "migrate")[0] == EXIT_OK
    code, out, _ = _run(capsys, "tenant", "list")
    assert code == EXIT_OK and out == ""


@pytest.mark.slow
def test_serve_on_a_port_in_use_is_refused_at_once_before_anything_starts(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "palimpsest", "--data-dir", str(store), "serve"],
            env=_no_settings() | {"PALIMPSEST_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == EXIT_USAGE
    [line] = done.stderr.splitlines()
    assert line.startswith(f"palimpsest: error: port {port} is in use")
    assert not store.exists()  # no database started, nothing written


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--version")
    assert code == EXIT_OK
    assert out == f"palimpsest {palimpsest.__version__}\n"


def _verbs(capsys: pytest.CaptureFixture[str], *path: str) -> list[list[str]]:
    """Every verb below ``path``, as its help lists them (``{serve,mcp,...}``)."""
    code, out, _ = _run(capsys, *path, "--help")
    assert code == EXIT_OK
    listed = re.search(r"^  \{([a-z,-]+)\}", out, re.MULTILINE)  # not an option's choices
    if listed is None:
        return [list(path)]
    return [verb for name in listed.group(1).split(",") for verb in _verbs(capsys, *path, name)]


def test_every_verb_describes_itself_in_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    verbs = _verbs(capsys)
    assert ["serve"] in verbs and ["token", "revoke"] in verbs
    for verb in verbs:
        code, out, _ = _run(capsys, *verb, "--help")
        assert code == EXIT_OK
        # usage, then a description paragraph, then the arguments
        description = out.split("\n\n")[1]
        assert not description.startswith(("options:", "positional arguments:")), verb


def test_mcp_help_says_it_needs_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "mcp", "--help")
    assert code == EXIT_OK
    assert re.search(r"PALIMPSEST_TOKEN\s+is\s+required", out), out


def test_token_revoke_help_states_how_long_a_serving_process_may_still_accept_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(capsys, "token", "revoke", "--help")
    assert code == EXIT_OK
    assert "PALIMPSEST_TOKEN_CACHE_S" in out


def _break_the_store(runtime: Runtime, schema: str) -> None:
    """Drop a read model both verbs read, as the owner (below every check): an event
    no code can read no longer fails them (it is reported, issue 43), a store whose
    schema is damaged still does."""
    with runtime.database.owner_connection() as conn:
        conn.execute(
            sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(schema, "revision_tenants"))
        )


@pytest.mark.parametrize("verb", [["verify"], ["rebuild"]])
def test_verify_and_rebuild_fail_in_one_line_and_show_the_traceback_only_with_debug(
    runtime: Runtime,
    schema_name: str,
    monkeypatch: pytest.MonkeyPatch,
    no_settings: None,
    capsys: pytest.CaptureFixture[str],
    verb: list[str],
) -> None:
    # Given a store of its own whose schema lost a table
    monkeypatch.setenv("DATABASE_URL", database_url(runtime))
    monkeypatch.setenv("PALIMPSEST_DB_SCHEMA", schema_name)
    assert _run(capsys, "migrate")[0] == EXIT_OK
    assert _run(capsys, "tenant", "create", "broken")[0] == EXIT_OK
    _break_the_store(runtime, schema_name)
    # When the verb fails, then it says so in one line
    code, _, err = _run(capsys, *verb, "--workers", "1")
    assert code == EXIT_FAILURE
    errors = [line for line in err.splitlines() if line.startswith("palimpsest: error: ")]
    assert errors == [err.splitlines()[-1]]  # one line, the last, after the progress
    assert "Traceback" not in err
    # And --debug shows where
    with pytest.raises(UndefinedTable):
        main([*verb, "--workers", "1", "--debug"])
