"""``palimpsest reindex``: embed every memory not yet embedded with the configured model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from palimpsest.api.cli._console import print_json, report
from palimpsest.api.cli._exit_code import EXIT_INTERRUPTED, EXIT_OK
from palimpsest.projections.recall.indexing import reindex

if TYPE_CHECKING:
    import argparse

    from palimpsest.projections.runtime import Runtime

__all__ = ["run_reindex"]


def run_reindex(runtime: Runtime, args: argparse.Namespace) -> int:
    """Embed what is missing, reporting progress; print the count and the model.

    Ctrl-C stops it with exit 130; memories already embedded stay embedded.
    """
    try:
        embedded = reindex(runtime.log, runtime.embedder, report=report)
    except KeyboardInterrupt:
        report("palimpsest reindex: interrupted; what was embedded stays")
        return EXIT_INTERRUPTED
    print_json({"embedded": embedded, "model": runtime.embedder.model_id})
    return EXIT_OK
