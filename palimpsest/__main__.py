"""``python -m palimpsest``: the ``palimpsest`` command without its installed script."""

from __future__ import annotations

import sys

from palimpsest.api.cli import main

if __name__ == "__main__":
    sys.exit(main())
