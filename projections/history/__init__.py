"""The log as a whole: replay it to a point, rebuild every read model from it,
verify the read models against it.

Modules:

- :mod:`palimpsest.projections.history.log_scan`: Reading the log in order, one write at a
  time, for rebuild, verify and replay.
- :mod:`palimpsest.projections.history.rebuild`: Rebuild every read model from position 0,
  while the service keeps serving.
- :mod:`palimpsest.projections.history._replay_mapper`: Decoding the log for replay: the
  log's own mapper, each id parsed once.
- :mod:`palimpsest.projections.history.replay`: Replay: what every memory was believed to
  be at a log position or a time.
- :mod:`palimpsest.projections.history._replay_workers`: Replaying tenants in parallel, all
  at one pinned log position.
- :mod:`palimpsest.projections.history.verify`: Verify: recompute every read model at one
  pinned log position and compare.
"""

from __future__ import annotations

__all__ = [
    "log_scan",
    "rebuild",
    "replay",
    "verify",
]
