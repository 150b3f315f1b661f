"""History commands: ``palimpsest replay``, ``rebuild`` and ``verify``.

Ctrl-C stops each of them cleanly: the live read models are swapped only at
the end of a rebuild, so an interrupted one leaves them as they were.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from palimpsest.api.cli._console import print_json, report
from palimpsest.api.cli._exit_code import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK
from palimpsest.projections.history.rebuild import rebuild, rebuild_tenant
from palimpsest.projections.history.replay import replay_beliefs
from palimpsest.projections.history.verify import verify

if TYPE_CHECKING:
    import argparse

    from palimpsest.projections.runtime import Runtime

__all__ = ["run_rebuild", "run_replay", "run_verify"]


def run_replay(runtime: Runtime, args: argparse.Namespace) -> int:
    """Write the beliefs at a log position or time as JSON lines (stdout or ``--out``)."""
    try:
        out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
        try:
            for line in replay_beliefs(
                runtime,
                at_position=args.at_position,
                as_of=args.as_of,
                tenant=args.tenant,
                report=report,
            ):
                out.write(json.dumps(line) + "\n")
        finally:
            if args.out:
                out.close()
    except KeyboardInterrupt:
        return _interrupted("replay")
    return EXIT_OK


def run_rebuild(runtime: Runtime, args: argparse.Namespace) -> int:
    """Rebuild every read model from the log (or one tenant's, ``--tenant``), swap it in,
    and print the figures. Memories with an event that cannot be read, or that the
    projection fails on, are rebuilt quarantined and counted (``unprojectable``):
    not a failure."""
    try:
        if args.tenant is not None:
            done = rebuild_tenant(runtime.database, args.tenant, report=report)
        else:
            done = rebuild(runtime.database, workers=args.workers, report=report)
    except KeyboardInterrupt:
        return _interrupted("rebuild")
    print_json(
        {
            "tenants": done.tenants,
            "events": done.events,
            "position": done.position,
            "caught_up_tenants": done.caught_up,
            "seconds": round(done.seconds, 3),
            "events_per_s": round(done.events / max(done.seconds, 1e-9)),
            "swap_seconds": round(done.swap_seconds, 3),
            "workers": done.workers,
            "split_tenants": done.split,
            "unprojectable": done.unprojectable,
        }
    )
    return EXIT_OK


def run_verify(runtime: Runtime, args: argparse.Namespace) -> int:
    """Print each divergence between the read models and a recomputation as a JSON
    line; fail (exit 1) if there is any. Memories the projection fails on (quarantined
    by the drain) are printed too (``"unprojectable"`` lines) but are not divergences:
    the read models hold what the log allows."""
    try:
        found = verify(runtime.database, tenant=args.tenant, workers=args.workers, report=report)
    except KeyboardInterrupt:
        return _interrupted("verify")
    for divergence in found.divergences:
        print_json(divergence.as_dict())
    for memory in found.unprojectable:
        print_json({"unprojectable": memory})
    report(
        f"verify: position {found.position}, {found.tenants} tenants, {found.events:,} "
        f"events, {found.rows:,} rows compared, {found.pending} memories pending revision, "
        f"{len(found.unprojectable)} unprojectable, {len(found.divergences)} divergences"
    )
    return EXIT_FAILURE if found.divergences else EXIT_OK


def _interrupted(command: str) -> int:
    report(f"palimpsest {command}: interrupted; live read models unchanged")
    return EXIT_INTERRUPTED
