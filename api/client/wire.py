"""Reading a response body into the server's own response models.

The client reuses the models in :mod:`palimpsest.api.schemas` (one shape, written once).
Some of their fields go by another name on the wire (a memory's
``memory_type`` is served as ``type``: a *serialization* alias), and pydantic
validates by field name only, so :func:`read_as` first renames every such key
back, guided by the model's core schema, then validates.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import cache
from typing import Any, TypeVar, cast

from pydantic import TypeAdapter

__all__ = ["read_as"]

T = TypeVar("T")

_Schema = dict[str, Any]


@cache
def _adapter(tp: Hashable) -> TypeAdapter[Any]:
    return TypeAdapter(cast(Any, tp))


def read_as(tp: type[T] | Any, data: Any) -> T:
    """Return ``data`` (decoded JSON) validated as ``tp``, served names read back."""
    adapter = _adapter(cast(Hashable, tp))
    schema = cast(_Schema, adapter.core_schema)
    refs: dict[str, _Schema] = {}
    _collect_refs(schema, refs)
    return cast(T, adapter.validate_python(_rename(schema, data, refs)))


def _collect_refs(node: Any, refs: dict[str, _Schema]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("ref"), str):
            refs.setdefault(node["ref"], node)
        for value in node.values():
            _collect_refs(value, refs)
    elif isinstance(node, list | tuple):
        for value in node:
            _collect_refs(value, refs)


def _resolve(schema: _Schema, refs: dict[str, _Schema]) -> _Schema:
    """Follow references and wrappers down to the schema that shapes the value."""
    while True:
        kind = schema.get("type")
        if kind == "definition-ref":
            schema = refs[schema["schema_ref"]]
        elif kind in ("definitions", "model", "nullable", "default") or (
            kind is not None and kind.startswith("function-") and "schema" in schema
        ):
            schema = schema["schema"]
        else:
            return schema


def _fits(schema: _Schema, value: dict[str, Any], refs: dict[str, _Schema]) -> bool:
    """Whether ``value``'s keys are all fields (by name or served name) of ``schema``."""
    if schema.get("type") != "model-fields":
        return False
    names = set(schema["fields"]) | {
        f["serialization_alias"] for f in schema["fields"].values() if "serialization_alias" in f
    }
    return set(value) <= names


def _rename(schema: _Schema, value: Any, refs: dict[str, _Schema]) -> Any:
    schema = _resolve(schema, refs)
    kind = schema.get("type")
    if kind == "model-fields" and isinstance(value, dict):
        fields: dict[str, _Schema] = schema["fields"]
        served: dict[str, str] = {
            str(f.get("serialization_alias", name)): name for name, f in fields.items()
        }
        renamed: dict[str, Any] = {}
        for key, item in value.items():
            name = served.get(str(key), str(key))
            field = fields.get(name)
            renamed[name] = _rename(field["schema"], item, refs) if field else item
        return renamed
    if kind in ("list", "set", "frozenset") and isinstance(value, list):
        return [_rename(schema["items_schema"], item, refs) for item in value]
    if kind == "dict" and isinstance(value, dict) and "values_schema" in schema:
        return {k: _rename(schema["values_schema"], v, refs) for k, v in value.items()}
    if kind == "tagged-union" and isinstance(value, dict):
        discriminator = schema["discriminator"]
        choice = (
            schema["choices"].get(value.get(discriminator))
            if isinstance(discriminator, str)
            else None
        )
        return _rename(choice, value, refs) if choice is not None else value
    if kind == "union" and isinstance(value, dict):
        for choice in schema["choices"]:
            member = _resolve(choice[0] if isinstance(choice, tuple) else choice, refs)
            if _fits(member, value, refs):
                return _rename(member, value, refs)
    return value
