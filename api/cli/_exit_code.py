"""The exit codes of ``palimpsest``, each naming what went wrong for the calling script."""

from __future__ import annotations

__all__ = [
    "EXIT_DATABASE",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
]

EXIT_OK = 0
EXIT_FAILURE = 1  # the command ran and failed: bad input, unknown tenant, divergences
EXIT_USAGE = 2  # bad arguments or settings, or another serve holds the data directory; nothing ran
EXIT_DATABASE = 3  # the database is unreachable or misconfigured
EXIT_INTERRUPTED = 130  # Ctrl-C: the shell's 128 + SIGINT
