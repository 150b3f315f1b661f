"""The ``palimpsest`` command line.

:mod:`palimpsest.api.cli._entry` runs one command and turns failures into one line
and a named exit code; :mod:`palimpsest.api.cli._arguments` parses the verbs with
the standard library alone (``--version`` and ``--help`` work without the server);
:mod:`palimpsest.api.cli._command` builds the settings and opens the store a verb
works on, if it is there (:mod:`palimpsest.api.cli._store`);
:mod:`palimpsest.api.cli._every_setting` reads every room's settings, for ``config``
and for what :mod:`palimpsest.api.cli._preflight` checks before ``serve`` starts
anything (its port too). Each other module runs a group of commands.
"""

from __future__ import annotations

from palimpsest.api.cli._entry import main
from palimpsest.api.cli._exit_code import (
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
