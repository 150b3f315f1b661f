"""Every problem type the service defines or documents maps to one exception class,
named after the service's error class and placed in the same tree, so that an
``except`` on the client catches what the same ``except`` catches on the server."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import httpx2
import pytest

from palimpsest.api import client
from palimpsest.api._problems import PROBLEMS
from palimpsest.api.client.errors import (
    PROBLEM_CLASSES,
    PROBLEM_TYPE_PREFIX,
    ConflictError,
    PalimpsestError,
    ProblemError,
    UnknownProblemError,
    problem_error,
)
from palimpsest.domain.errors import PalimpsestError as ServerPalimpsestError

ROOT = Path(__file__).resolve().parents[3]
SLUG = re.compile(r"^[a-z]+(-[a-z]+)+$")


def _slugs_in_the_service() -> set[str]:
    """Every slug the service can answer: the error-class mapping, and every slug
    literal in the module that renders problems or passed to ``problem_response``."""
    slugs = {slug for slug, _, _ in PROBLEMS.values()}
    for path in (ROOT / "api").rglob("*.py"):
        if "client" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                path.name == "problems.py"
                and isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SLUG.match(node.value)
            ):
                slugs.add(node.value)
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "problem_response"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
            ):
                slugs.add(str(node.args[1].value))
    return slugs


def _slugs_in_the_docs() -> set[str]:
    errors = (ROOT / "docs" / "api.md").read_text().split("## Errors", 1)[1]
    return set(re.findall(r"^\| `([a-z-]+)` \| [0-9]{3} \|", errors, flags=re.MULTILINE))


def _server_class(slug: str) -> type[ServerPalimpsestError] | None:
    """The service's error class of a slug: the first PROBLEMS maps to it (a class
    before its subclasses; ``ConcurrentWriteError`` before ``StaleReadError``, which
    the service retries inside a write), or None for HTTP's own refusals."""
    return next((cls for cls, (s, _, _) in PROBLEMS.items() if s == slug), None)


def _class_name(slug: str) -> str:
    server = _server_class(slug)
    if server is not None:
        return server.__name__
    name = "".join(part.capitalize() for part in slug.split("-"))
    return name if name.endswith("Error") else name + "Error"


def _answer(slug: str, status: int = 409) -> ProblemError:
    body = {"type": PROBLEM_TYPE_PREFIX + slug, "status": status, "detail": "d"}
    return problem_error(httpx2.Response(status, json=body))


def test_every_problem_type_maps_to_one_class_named_after_it() -> None:
    service, documented = _slugs_in_the_service(), _slugs_in_the_docs()
    assert len(documented) > 20 and documented <= service | set(PROBLEM_CLASSES)
    for slug in service | documented:
        cls = PROBLEM_CLASSES.get(slug)
        assert cls is not None, slug
        assert cls.__name__ == _class_name(slug) and cls.slug == slug
    classes = list(PROBLEM_CLASSES.values())
    assert len(set(classes)) == len(classes)  # one class per type, never shared


def test_an_answer_raises_its_types_class_or_the_unknown_one() -> None:
    for slug, cls in PROBLEM_CLASSES.items():
        error = _answer(slug)
        assert type(error) is cls and isinstance(error, ProblemError)
        assert error.detail == "d" and error.status == 409
    strange = problem_error(httpx2.Response(418, json={"type": "urn:elsewhere:teapot"}))
    assert type(strange) is UnknownProblemError
    not_a_problem = problem_error(httpx2.Response(502, text="<html>bad gateway</html>"))
    assert type(not_a_problem) is UnknownProblemError and "bad gateway" in not_a_problem.detail


def test_a_client_class_catches_the_answers_its_server_class_catches() -> None:
    # The tree is derived from the service's classes: a class of the client catches
    # an answer exactly when the service's class of that name catches the error
    # behind it. HTTP's own refusals have no class on the service: only their own
    # class (and ProblemError) catches them.
    slugs = set(PROBLEM_CLASSES)
    assert {slug for slug, _, _ in PROBLEMS.values()} <= slugs
    for raised in sorted(slugs):
        error = _answer(raised)
        for caught in sorted(slugs):
            server_raised, server_caught = _server_class(raised), _server_class(caught)
            expected = (
                raised == caught
                if server_raised is None or server_caught is None
                else issubclass(server_raised, server_caught)
            )
            assert isinstance(error, PROBLEM_CLASSES[caught]) is expected, (raised, caught)


def test_except_conflict_error_catches_a_stale_proposal() -> None:
    with pytest.raises(ConflictError) as caught:
        raise _answer("stale-proposal")
    assert caught.value.slug == "stale-proposal" and caught.value.status == 409
    assert isinstance(caught.value, PalimpsestError)
    assert not isinstance(_answer("validation-error", 422), PalimpsestError)


def test_every_class_a_caller_catches_is_exported_by_the_client() -> None:
    values = (getattr(client, name) for name in client.__all__)
    exported = {value for value in values if isinstance(value, type)}
    assert set(PROBLEM_CLASSES.values()) <= exported
    roots = {
        client.APIConnectionError,
        client.PalimpsestClientError,
        client.ProblemError,
        client.UnknownProblemError,
    }
    assert roots <= exported
