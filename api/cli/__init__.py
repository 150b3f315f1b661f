"""The ``palimpsest`` command line.

:mod:`palimpsest.api.cli.entry` parses the arguments, runs one command and turns failures
into one line and a named exit code; each other module runs a group of commands.
"""

from __future__ import annotations

from palimpsest.api.cli.entry import main
from palimpsest.api.cli.exit_code import (
    EXIT_DATABASE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
)

__all__ = [
    "EXIT_DATABASE",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "main",
]
