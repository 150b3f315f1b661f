"""The command line: one-line errors with named exit codes, secrets masked, tokens that work."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.embedded import ServeLock
from tests.conftest import RunDatabase, Tenant


@pytest.fixture
def cli_env(test_database: RunDatabase, runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's store in the environment, made (verbs other than migrate and serve
    open only a store that exists)."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    for name, value in test_database.env.items():
        monkeypatch.setenv(name, value)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
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
        ["token", "revoke", "not-a-uuid", "--tenant", "t"],
        ["token", "create", "--principal", "p", "--role", "reader"],
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
    # Unset, the local model on onnxruntime: the test extra installs it.
    assert shown["embedder"] == "local-onnx" and shown["conflict_floor"] == 0.5
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

    monkeypatch.setattr("palimpsest.projections.recall.indexing.index_pending", interrupted)
    code, out, err = _run(capsys, "reindex")
    assert code == 130 and out == ""
    assert err.strip().splitlines()[-1] == (
        "palimpsest reindex: interrupted; what was embedded stays"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--data-dir", "{dir}", "--debug", "config"],
        ["config", "--data-dir", "{dir}", "--debug"],
        ["--debug", "config", "--data-dir", "{dir}"],
    ],
)
def test_global_options_work_before_and_after_the_verb(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("PALIMPSEST_DATA_DIR", raising=False)
    code, out, _ = _run(capsys, *(a.replace("{dir}", str(tmp_path)) for a in argv))
    assert code == EXIT_OK
    assert json.loads(out)["data_dir"] == str(tmp_path)


def test_token_path_prints_where_serve_saves_the_admin_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    code, out, _ = _run(capsys, "token", "path", "--data-dir", str(tmp_path))
    assert code == EXIT_OK
    assert out == f"{tmp_path / 'admin-token'}\n"
    # With an external database serve saves no token: one line, exit 1
    monkeypatch.setenv("DATABASE_URL", "postgresql://owner@db.internal:5432/pal")
    code, out, err = _run(capsys, "token", "path")
    assert code == EXIT_FAILURE and out == ""
    assert err.count("\n") == 1 and "tenant create" in err


def _json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_a_tenant_is_named_where_an_id_is_asked_for_and_listed(
    cli_env: None, client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"acme-{uuid.uuid4().hex[:8]}"
    code, out, _ = _run(capsys, "tenant", "create", name)
    assert code == EXIT_OK
    tenant = json.loads(out)
    code, out, _ = _run(
        capsys, "token", "create", "--tenant", name, "--principal", "agent", "--role", "writer"
    )
    assert code == EXIT_OK
    writer = json.loads(out)
    assert writer["tenant_id"] == tenant["tenant_id"]
    body: dict[str, Any] = {"type": "fact", "scope": "u", "content": "x"}
    headers = {"Authorization": f"Bearer {writer['token']}"}
    assert client.post("/v1/memories", json=body, headers=headers).status_code == 201

    code, out, _ = _run(capsys, "tenant", "list")
    assert code == EXIT_OK
    listed = {line["name"]: line["tenant_id"] for line in _json_lines(out)}
    assert listed[name] == tenant["tenant_id"]


def test_a_second_tenant_with_a_taken_name_is_refused_and_nothing_is_written(
    cli_env: None, snapshot: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"taken-{uuid.uuid4().hex[:8]}"
    assert _run(capsys, "tenant", "create", name)[0] == EXIT_OK
    before = snapshot()
    code, out, err = _run(capsys, "tenant", "create", name, "--admin", "someone-else")
    assert code == EXIT_FAILURE and out == ""
    assert err.count("\n") == 1 and err.startswith("palimpsest: error: ") and name in err
    assert snapshot() == before
    # A name that reads as a tenant id is refused too (--tenant would take it for one)
    code, _, err = _run(capsys, "tenant", "create", str(uuid.uuid4()))
    assert code == EXIT_FAILURE and err.count("\n") == 1
    assert snapshot() == before


def test_tokens_are_listed_and_a_revoked_token_stops_authenticating(
    cli_env: None, client: TestClient, tenant: Tenant, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys,
        "token",
        "create",
        "--tenant",
        str(tenant.id),
        "--principal",
        "bot",
        "--role",
        "reader",
    )
    assert code == EXIT_OK
    reader = json.loads(out)
    headers = {"Authorization": f"Bearer {reader['token']}"}
    assert client.get("/v1/memories", headers=headers).status_code == 200

    code, out, _ = _run(capsys, "token", "list", "--tenant", str(tenant.id))
    assert code == EXIT_OK
    listed = _json_lines(out)
    assert {"token_id": reader["token_id"], "principal": "bot", "role": "reader"}.items() <= next(
        line for line in listed if line["token_id"] == reader["token_id"]
    ).items()
    assert reader["token"] not in out and "sha256" not in out
    assert all("token" not in line for line in listed)
    assert {line["token_id"] for line in listed} == {
        str(tenant.admin.token_id),
        reader["token_id"],
    }

    code, out, _ = _run(capsys, "token", "revoke", reader["token_id"], "--tenant", str(tenant.id))
    assert code == EXIT_OK and json.loads(out)["revoked"] is True
    refused = client.get("/v1/memories", headers=headers)
    assert refused.status_code == 401
    assert refused.json()["type"] == "urn:palimpsest:problem:unauthenticated"
    assert client.get("/v1/memories", headers=tenant.headers()).status_code == 200
    code, out, _ = _run(capsys, "token", "list", "--tenant", str(tenant.id))
    assert [line["token_id"] for line in _json_lines(out)] == [str(tenant.admin.token_id)]
    # The revocation is an event in the tenant's log, which the feed shows
    feed = client.get("/v1/events", headers=tenant.headers()).json()["events"]
    assert [e["type"] for e in feed][-1] == "TokenRevoked"

    # Revoking it again changes nothing; an unknown token is a one-line failure
    code, out, _ = _run(capsys, "token", "revoke", reader["token_id"], "--tenant", str(tenant.id))
    assert code == EXIT_OK and json.loads(out)["already"] is True
    code, _, err = _run(capsys, "token", "revoke", str(uuid.uuid4()), "--tenant", str(tenant.id))
    assert code == EXIT_FAILURE and err.count("\n") == 1


def test_serve_on_a_data_directory_another_serve_holds_exits_with_the_usage_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    held = ServeLock(tmp_path)
    held.acquire()
    try:
        code, out, err = _run(capsys, "--data-dir", str(tmp_path), "serve", "--port", "1")
    finally:
        held.release()
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and "in use" in err
    assert not (tmp_path / "pgdata").exists()  # refused before anything started
