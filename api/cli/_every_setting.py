"""Every setting of every room, read together: ``palimpsest config`` shows them with
secrets masked, and ``serve`` and ``mcp`` refuse an invalid one before they start
anything.

Each room keeps its settings beside their users (docs/configuration.md); this is
the one list of them all. A test finds every pydantic-settings class palimpsest
defines and fails when one is missing here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pydantic import SecretStr

from palimpsest.api._settings import ApiSettings
from palimpsest.api.mcp._settings import McpSettings
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.drains.settings import DrainSettings, ForgettingPassSettings
from palimpsest.projections.judgment.importance import ImportanceSettings
from palimpsest.projections.judgment.settings import JudgeSettings
from palimpsest.projections.judgment.summariser import SummariserSettings
from palimpsest.projections.recall.pass_candidates import PassSettings
from palimpsest.projections.recall.settings import EmbeddingSettings
from palimpsest.projections.store.settings import DatabaseSettings

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_settings import BaseSettings

__all__ = ["SETTINGS_CLASSES", "read_every_setting", "settings_error", "shown_settings"]

SETTINGS_CLASSES: tuple[type[BaseSettings], ...] = (
    DatabaseSettings,
    ApiSettings,
    McpSettings,
    DrainSettings,
    ForgettingPassSettings,
    EmbeddingSettings,
    PassSettings,
    JudgeSettings,
    SummariserSettings,
    ImportanceSettings,
    ProposalSettings,
)
"""Every room's settings class, the database's and the API's first (the command line's
flags override those two)."""

_TOKEN_VARIABLE = "PALIMPSEST_TOKEN"
"""A client's token, not the service's (``mcp``, ``forgetting-pass`` and ``cycle`` send
it): read where it is used, shown here masked."""

_MASK = "********"


def read_every_setting(db: DatabaseSettings, api: ApiSettings) -> list[BaseSettings]:
    """Return every room's settings: ``db`` and ``api`` (read already, with the command
    line's flags), then the others, read from the environment now.

    Raises:
        pydantic.ValidationError: a setting is invalid (:func:`settings_error` names it).
    """
    return [db, api, *(cls() for cls in SETTINGS_CLASSES[2:])]


def shown_settings(every: list[BaseSettings]) -> dict[str, object]:
    """Return each setting by its variable's name, lower case without ``PALIMPSEST_``
    (``port``, ``mcp_admin_tools``, ``database_url``), each secret masked."""
    shown: dict[str, object] = {}
    for settings in every:
        values = settings.model_dump(mode="json")
        for name in type(settings).model_fields:
            key = _variable(type(settings), name).lower().removeprefix("palimpsest_")
            value = getattr(settings, name)
            if isinstance(value, SecretStr):
                shown[key] = _MASK
            else:
                shown[key] = values[name]
        if isinstance(settings, DatabaseSettings):
            shown["database_url"] = _masked_url(settings)
            shown["embedded"] = settings.embedded
        if isinstance(settings, EmbeddingSettings):
            shown["embedder"] = settings.chosen_embedder  # unset: the runtime it picks
    shown["token"] = _MASK if os.environ.get(_TOKEN_VARIABLE) else None
    return shown


def _masked_url(settings: DatabaseSettings) -> str | None:
    """``DATABASE_URL`` with its password masked: where the database is stays readable."""
    if settings.database_url is None:
        return None
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(settings.database_url.get_secret_value())
    if params.get("password"):
        params["password"] = _MASK
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def settings_error(e: ValidationError) -> str:
    """Return the one line that names an invalid setting's variable and value (a
    secret's value hidden), or states a rule across settings."""
    first = e.errors()[0]
    if not first["loc"]:  # a rule across settings: its message names them
        return f"invalid settings: {first['msg'].removeprefix('Value error, ')}"
    name = str(first["loc"][0])
    owner = next((c for c in SETTINGS_CLASSES if c.__name__ == e.title), None)
    if owner is not None and name in owner.model_fields:
        variable = _variable(owner, name)
        secret = owner.model_fields[name].annotation in (SecretStr, SecretStr | None)
    else:
        variable, secret = f"PALIMPSEST_{name}".upper(), False
    shown = first.get("input")
    if secret or any(part in variable.lower() for part in ("url", "password", "key")):
        shown = "<hidden>"
    return f"{variable}={shown!r} is invalid: {first['msg']}"


def _variable(cls: type[BaseSettings], name: str) -> str:
    """The environment variable of field ``name`` of ``cls``."""
    alias = cls.model_fields[name].validation_alias
    if isinstance(alias, str):
        return alias
    return f"{cls.model_config.get('env_prefix', '')}{name}".upper()
