"""The command line: one-line errors with named exit codes, secrets masked, tokens that work."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.cli import EXIT_OK, EXIT_USAGE, main
from tests.conftest import RunDatabase


@pytest.fixture
def cli_env(test_database: RunDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    for name, value in test_database.env.items():
        monkeypatch.setenv(name, value)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_tenant_and_token_create_print_tokens_that_authenticate(
    cli_env: None, client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "tenant", "create", "cli-tenant")
    assert code == EXIT_OK
    tenant = json.loads(out)
    code, out, _ = _run(
        capsys,
        "token",
        "create",
        "--tenant",
        tenant["tenant_id"],
        "--principal",
        "agent-7",
        "--role",
        "reader",
    )
    assert code == EXIT_OK
    reader = json.loads(out)
    assert reader["role"] == "reader"
    body: dict[str, Any] = {"type": "fact", "scope": "u", "content": "x"}
    admin_headers = {"Authorization": f"Bearer {tenant['token']}"}
    assert client.post("/v1/memories", json=body, headers=admin_headers).status_code == 201
    reader_headers = {"Authorization": f"Bearer {reader['token']}"}
    assert client.post("/v1/memories", json=body, headers=reader_headers).status_code == 403


def test_migrate_on_a_current_schema_succeeds(
    cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "migrate")
    assert code == EXIT_OK
    assert "schema is current" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        ["token", "create", "--tenant", "not-a-uuid", "--principal", "p", "--role", "reader"],
        [
            "token",
            "create",
            "--tenant",
            "00000000-0000-0000-0000-000000000000",
            "--principal",
            "p",
            "--role",
            "overlord",
        ],
        ["replay"],
        ["replay", "--at-position", "-1"],
        ["replay", "--at-position", "3", "--as-of", "2026-10-01T00:00:00Z"],
        ["replay", "--as-of", "yesterday"],
        ["replay", "--as-of", "2026-10-01T00:00:00"],
        ["verify", "--tenant", "nope"],
        ["verify", "--workers", "many"],
        ["rebuild", "--workers", "65"],
    ],
)
def test_bad_arguments_print_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == EXIT_USAGE
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("palimpsest: error: ")


def test_unknown_tenant_is_a_one_line_failure(
    cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys,
        "token",
        "create",
        "--tenant",
        "00000000-0000-0000-0000-000000000000",
        "--principal",
        "p",
        "--role",
        "reader",
    )
    assert code == 1
    assert err.startswith("palimpsest: error: tenant") and err.count("\n") == 1


def test_invalid_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PALIMPSEST_PORT", "eighty")
    code, _, err = _run(capsys, "config")
    assert code == EXIT_USAGE
    assert "PALIMPSEST_PORT='eighty'" in err


def test_config_masks_the_database_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://owner:hunter2@db.internal:5432/pal")
    monkeypatch.setenv("PALIMPSEST_DB_APP_PASSWORD", "s3cret-app")
    monkeypatch.setenv("PALIMPSEST_EMBEDDING_API_KEY", "sk-embed")
    code, out, _ = _run(capsys, "config")
    assert code == EXIT_OK
    assert "hunter2" not in out and "s3cret-app" not in out and "sk-embed" not in out
    shown = json.loads(out)
    assert shown["embedder"] == "local" and shown["conflict_floor"] == 0.5
    assert "db.internal" in shown["database_url"]
    assert shown["embedded"] is False and shown["port"] == 8080


def test_an_http_embedder_without_its_endpoint_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PALIMPSEST_EMBEDDER", "http")
    code, out, err = _run(capsys, "config")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "PALIMPSEST_EMBEDDING_URL" in err


def test_reindex_reports_progress_and_stops_cleanly_on_ctrl_c(
    cli_env: None,
    client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, "reindex")
    assert code == EXIT_OK and "reindex: done" in err
    assert json.loads(out)["model"] == "sentence-transformers/all-MiniLM-L6-v2"

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("projections.recall.indexing.index_pending", interrupted)
    code, out, err = _run(capsys, "reindex")
    assert code == 130 and out == ""
    assert err.strip().splitlines()[-1] == (
        "palimpsest reindex: interrupted; what was embedded stays"
    )
