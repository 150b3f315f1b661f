"""Every setting of every room: ``palimpsest config`` shows each one (secrets masked)
and refuses an invalid one, and ``serve`` refuses it before it writes anything."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from pathlib import Path

import pytest
from pydantic import SecretStr
from pydantic_settings import BaseSettings

import palimpsest
from palimpsest.api.cli import EXIT_OK, EXIT_USAGE, main
from tests.api.cli.serving import assert_setting_refused_before_writing

_NOT_IMPORTED = {"palimpsest.workers.boot"}  # importing it connects to a broker


def _settings_classes() -> list[type[BaseSettings]]:
    """Every pydantic-settings class palimpsest defines, found by importing every module."""
    for module in pkgutil.walk_packages(palimpsest.__path__, "palimpsest."):
        if module.name not in _NOT_IMPORTED and ".migrations.versions" not in module.name:
            importlib.import_module(module.name)
    found: list[type[BaseSettings]] = []
    pending = list(BaseSettings.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("palimpsest."):
            found.append(cls)
    return sorted(found, key=lambda c: c.__qualname__)


def _variables() -> dict[str, tuple[type[BaseSettings], str]]:
    """Each setting's environment variable, with its class and field."""
    variables: dict[str, tuple[type[BaseSettings], str]] = {}
    for cls in _settings_classes():
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            variable = alias if isinstance(alias, str) else f"{prefix}{name}".upper()
            variables[variable] = (cls, name)
    return variables


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith(("PALIMPSEST_", "DATABASE_", "BROKER_")):
            monkeypatch.delenv(name)


def test_config_shows_every_setting_of_every_room_and_masks_each_secret(
    no_settings: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given every secret set to a value of its own
    variables = _variables()
    assert len({cls for cls, _ in variables.values()}) >= 11  # every room's, not a few
    secrets: dict[str, str] = {}
    for variable, (cls, name) in variables.items():
        if cls.model_fields[name].annotation in (SecretStr, SecretStr | None):
            secrets[variable] = f"secret-{len(secrets)}-value"
    secrets["DATABASE_URL"] = "postgresql://owner:secret-db-value@db.internal:5432/pal"
    secrets["BROKER_URL"] = "redis://:secret-broker-value@127.0.0.1:6379/0"
    secrets["PALIMPSEST_TOKEN"] = "pal_secret-token-value"
    for variable, value in secrets.items():
        monkeypatch.setenv(variable, value)

    # When config prints them
    code = main(["config"])
    out = capsys.readouterr().out
    assert code == EXIT_OK

    # Then each setting is there, named as its variable is, and no secret is shown
    shown = json.loads(out)
    keys = {variable.lower().removeprefix("palimpsest_") for variable in variables}
    assert keys <= set(shown), sorted(keys - set(shown))
    assert not any("secret-" in json.dumps(value) for value in shown.values()), out
    assert shown["judge"] == "none" and shown["threshold_archive"] == 0.9
    assert shown["collapse_share"] == 0.05 and shown["mcp_admin_tools"] is False
    assert shown["token"] == "********" and shown["embedding_api_key"] == "********"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PALIMPSEST_JUDGE", "bogus"),
        ("PALIMPSEST_THRESHOLD_ARCHIVE", "7"),
        ("PALIMPSEST_COLLAPSE_MINIMUM", "-1"),
        ("PALIMPSEST_SUMMARISER", "gpt"),
        ("PALIMPSEST_IMPORTANCE_RETRIES", "99"),
        ("PALIMPSEST_STALE_WINDOW_DAYS", "0"),
        ("PALIMPSEST_FORGETTING_PASS_CRON", "whenever"),
        ("PALIMPSEST_MCP_ADMIN_TOOLS", "maybe"),
        ("PALIMPSEST_DRAIN_BATCH", "0"),
        ("PALIMPSEST_EMBEDDING_THREADS", "0"),
    ],
)
def test_config_refuses_an_invalid_setting_of_any_room_in_one_line_naming_it(
    no_settings: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
) -> None:
    monkeypatch.setenv(variable, value)
    code = main(["config"])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and out == ""
    [line] = err.splitlines()
    assert line.startswith(f"palimpsest: error: {variable}={value!r}")


def test_an_invalid_secret_is_named_but_not_shown(
    no_settings: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BROKER_URL", "http://user:hunter2@broker")
    assert main(["config"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "BROKER_URL" in err and "hunter2" not in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PALIMPSEST_JUDGE", "bogus"),
        ("PALIMPSEST_THRESHOLD_ARCHIVE", "7"),
        ("PALIMPSEST_SUMMARISER", "gpt"),
        ("PALIMPSEST_PAIR_FUSION", "mean"),
        ("PALIMPSEST_MCP_ADMIN_TOOLS", "maybe"),
        ("PALIMPSEST_EMBEDDING_THREADS", "many"),
    ],
)
def test_serve_refuses_an_invalid_setting_of_any_room_before_it_writes(
    tmp_path: Path, variable: str, value: str
) -> None:
    assert_setting_refused_before_writing(tmp_path / "store", variable, value)
