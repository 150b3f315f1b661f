"""What an agent developer installs: one import package, and a client without the server.

A wheel is built from the repository (a copy of it, so the checkout gets no
``build/``) and installed, not editable, into a fresh virtualenv with no extra:
what ``pip install palimpsest-memory`` gives. That virtualenv resolves the
client's two requirements from the package index, as a user's would.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from palimpsest.projections.runtime import Runtime
from tests.api.cli.serving import start_serve, stop_serve
from tests.conftest import Tenant

ROOT = Path(__file__).resolve().parents[1]

# Distributions the client must not bring: the server and what it runs on.
SERVER_DISTRIBUTIONS = {
    "alembic",
    "dramatiq",
    "eventsourcing",
    "fastapi",
    "pgserver",
    "pgvector",
    "psycopg",
    "psycopg-binary",
    "sentence-transformers",
    "sqlalchemy",
    "starlette",
    "torch",
    "uvicorn",
}

# A user's project, beside which palimpsest is installed: packages named as two of
# our rooms are, which palimpsest must neither shadow nor graft itself under.
USER_FILES = {
    "api/__init__.py": "WHOSE = 'the user'\n",
    "api/client.py": "def talk() -> str:\n    return 'the user client'\n",
    "domain/__init__.py": "WHOSE = 'the user'\n",
}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the checkout, as ``python -m build`` makes it."""
    source = tmp_path_factory.mktemp("source") / "palimpsest"
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
        ),
    )
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("palimpsest_memory-*.whl")
    return built


@pytest.fixture(scope="session")
def client_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh virtualenv with the wheel installed, no extra; its ``python``."""
    venv = tmp_path_factory.mktemp("client-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    return python


def _top_level(names: list[str]) -> set[str]:
    """The first path component of every entry that is not the wheel's metadata."""
    return {name.split("/", 1)[0] for name in names} - {
        name.split("/", 1)[0] for name in names if ".dist-info/" in name
    }


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert _top_level(names) == {"palimpsest"}
    # The rooms are inside it as files (the checkout's links resolved), with what
    # the service reads at run time: the review page's templates and assets.
    for room in ("domain", "projections", "workers", "api"):
        assert f"palimpsest/{room}/__init__.py" in names
    assert "palimpsest/api/templates/review/base.html" in names or any(
        name.startswith("palimpsest/api/templates/review/") for name in names
    )
    assert any(name.startswith("palimpsest/api/static/review/") for name in names)
    assert not any(name.startswith("tests/") for name in names)


@pytest.mark.slow
def test_the_client_install_brings_no_server(client_env: Path) -> None:
    listed = subprocess.run(
        [client_env, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    installed = {entry["name"].lower() for entry in json.loads(listed.stdout)}
    assert "palimpsest-memory" in installed
    assert installed & SERVER_DISTRIBUTIONS == set()


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.slow
def test_the_client_works_beside_a_project_with_its_own_api_and_domain(
    runtime: Runtime, tenant: Tenant, client_env: Path, tmp_path: Path
) -> None:
    # Given a user's project with packages named api/ and domain/, and a server
    project = tmp_path / "project"
    for name, text in USER_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    before = _digests(project)
    server, base = start_serve(runtime)
    try:
        # When the project's code imports its own packages and palimpsest's client
        script = (
            "import json, sys\n"
            "import api, api.client, domain\n"
            "from palimpsest import Client\n"
            f"with Client({base!r}, token={tenant.admin.token!r}) as client:\n"
            "    created = client.create_memory('Prefers tea', type='preference', scope='user')\n"
            "    read = client.read_memory(created.id, wait=20)\n"
            "heavy = [m for m in ('sqlalchemy', 'psycopg', 'eventsourcing', 'fastapi')"
            " if m in sys.modules]\n"
            "print(json.dumps({'api': api.WHOSE, 'client': api.client.talk(),"
            " 'domain': domain.WHOSE, 'content': read.content, 'status': read.status,"
            " 'heavy': heavy}))\n"
        )
        ran = subprocess.run(
            [client_env, "-c", script],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stop_serve(server)
    # Then both work, each as its own, and the project's files are untouched
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen == {
        "api": "the user",
        "client": "the user client",
        "domain": "the user",
        "content": "Prefers tea",
        "status": "current",
        "heavy": [],
    }
    assert _digests(project) == before
