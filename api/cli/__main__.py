"""``python -m palimpsest.api.cli``: the ``palimpsest`` command without its installed script."""

from __future__ import annotations

import sys

from palimpsest.api.cli._entry import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
