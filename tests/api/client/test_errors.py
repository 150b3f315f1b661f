"""Every problem type the service defines or documents maps to one exception class."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import httpx2

from palimpsest.api.client.errors import (
    PROBLEM_CLASSES,
    PROBLEM_TYPE_PREFIX,
    ProblemError,
    UnknownProblemError,
    problem_error,
)
from palimpsest.api.problems import PROBLEMS

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


def _class_name(slug: str) -> str:
    name = "".join(part.capitalize() for part in slug.split("-"))
    return name if name.endswith("Error") else name + "Error"


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
        body = {"type": PROBLEM_TYPE_PREFIX + slug, "status": 409, "detail": "d"}
        error = problem_error(httpx2.Response(409, json=body))
        assert type(error) is cls and isinstance(error, ProblemError)
        assert error.detail == "d" and error.status == 409
    strange = problem_error(httpx2.Response(418, json={"type": "urn:elsewhere:teapot"}))
    assert type(strange) is UnknownProblemError
    not_a_problem = problem_error(httpx2.Response(502, text="<html>bad gateway</html>"))
    assert type(not_a_problem) is UnknownProblemError and "bad gateway" in not_a_problem.detail
