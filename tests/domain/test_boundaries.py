"""Package boundaries: domain/ is pure, and every package's __all__ is sorted and complete."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["domain", "projections", "workers", "api"]


def test_domain_loads_no_infrastructure() -> None:
    modules = [f"domain.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "domain")])]
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "heavy = ('sqlalchemy', 'psycopg', 'fastapi', 'dramatiq', 'pgserver', 'starlette')\n"
        "bad = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_domain_never_reads_the_environment_or_the_clock() -> None:
    for path in (ROOT / "domain").glob("*.py"):
        source = path.read_text()
        assert "os.environ" not in source and "getenv" not in source, path
        assert "datetime.now" not in source and "time.time" not in source, path


@pytest.mark.parametrize("package", PACKAGES)
def test_module_all_lists_are_sorted_and_name_every_public_definition(package: str) -> None:
    for info in pkgutil.iter_modules([str(ROOT / package)]):
        if info.name.startswith("_") or info.ispkg or info.name == "boot":
            continue  # workers.boot is dramatiq's entry point: importing it connects
        module = importlib.import_module(f"{package}.{info.name}")
        exported = getattr(module, "__all__", None)
        if exported is None:  # routers expose a router only
            continue
        assert list(exported) == sorted(exported), module.__name__
        tree = ast.parse((ROOT / package / f"{info.name}.py").read_text())
        public = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
        }
        assert public <= set(exported), (module.__name__, public - set(exported))
