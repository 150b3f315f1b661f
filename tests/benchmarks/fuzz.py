"""The API fuzzed at length: the default run's fuzz test with 10,000 cases or more.

Usage: python tests/benchmarks/fuzz.py [--examples N] [--min-cases 10000]

Runs ``tests/api/test_fuzz.py`` (a real server on loopback, a fresh tenant's
token, every schemathesis check) with ``N`` generated examples per operation
instead of the default run's few, in its own pytest session with its own
embedded PostgreSQL. Prints the cases sent, the duration and the failures,
and exits non-zero if a check failed or fewer than ``--min-cases`` cases
were sent (raise ``--examples`` then). Not part of the default test run
(pytest ignores tests/benchmarks); docs/fuzzing.md records its figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=500, help="examples per operation")
    parser.add_argument("--min-cases", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="palimpsest-fuzz-") as scratch:
        report = Path(scratch) / "report.json"
        env = {
            **os.environ,
            "PALIMPSEST_FUZZ_EXAMPLES": str(args.examples),
            "PALIMPSEST_FUZZ_REPORT": str(report),
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            "tests/api/test_fuzz.py::test_every_operation_passes_every_check",
            "-q",
            "-p",
            "no:cacheprovider",
        ]
        print(f"fuzzing with {args.examples} examples per operation: {' '.join(command)}")
        started = time.monotonic()
        result = subprocess.run(command, cwd=ROOT, env=env, check=False)
        elapsed = time.monotonic() - started
        figures = json.loads(report.read_text()) if report.exists() else {"cases": 0, "failed": 0}
    print(
        f"cases sent: {figures['cases']}; of them failing a check: {figures['failed']}; "
        f"duration: {elapsed:.0f} s; pytest exit code: {result.returncode}"
    )
    if figures["cases"] < args.min_cases:
        print(f"fewer than {args.min_cases} cases: raise --examples", file=sys.stderr)
        return 1
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
