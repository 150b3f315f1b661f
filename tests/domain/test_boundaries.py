"""domain/ is pure: it loads no infrastructure and reads neither the environment nor the clock.

Which room imports which, and every module's ``__all__``, are checked by
``tests/test_architecture.py``.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_domain_loads_no_infrastructure() -> None:
    modules = [f"palimpsest.domain.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "domain")])]
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
