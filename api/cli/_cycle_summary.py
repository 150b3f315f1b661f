"""A decay cycle's report as one screen a person reads: counts, then what it did to
which memory, by text."""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_LINES_PER_LIST", "cycle_summary"]

MAX_LINES_PER_LIST = 5
"""Memories shown per list (faded, proposed, archived, duplicates); the rest are counted."""
_TEXT_CHARS = 70


def _label(report: dict[str, Any], memory_id: str) -> str:
    found = report.get("memories", {}).get(memory_id)
    if found is None:
        return memory_id[:8]
    text = found.get("text") or "(no text)"
    text = text if len(text) <= _TEXT_CHARS else text[: _TEXT_CHARS - 1] + "…"
    return f"{found['type']:<10} {found['scope']:<8} “{text}”  [{memory_id[:8]}]"


def _listed(title: str, lines: list[str]) -> list[str]:
    if not lines:
        return []
    shown = [f"{title} ({len(lines)}):"] + [f"  {line}" for line in lines[:MAX_LINES_PER_LIST]]
    if len(lines) > MAX_LINES_PER_LIST:
        shown.append(f"  … and {len(lines) - MAX_LINES_PER_LIST} more (--json for all)")
    return shown


def cycle_summary(report: dict[str, Any]) -> str:
    """Return the report as at most about 35 lines: the counts per bucket with what
    the buckets mean, then duplicates, proposals, archivals and fades, each memory by
    its type, scope and text (its id's first 8 characters after)."""
    counts = report.get("counts", {})
    kind = "dry run (nothing written)" if report.get("dry_run") else "cycle"
    lines = [
        f"decay {kind} {report.get('cycle_id', '')} at {report.get('snapshot_at', '')}"
        f" (policy version {report.get('policy_version')})",
        "  ".join(f"{bucket} {counts.get(bucket, 0)}" for bucket in ("keep", "fade", "prune")),
    ]
    for bucket, meaning in report.get("buckets_explained", {}).items():
        lines.append(f"  {bucket}: {meaning}")
    duplicates = [
        f"{_label(report, d['older'])}\n    newer: {_label(report, d['newer'])}"
        f" (similarity {d['similarity']:.2f})"
        for d in report.get("duplicates", [])
    ]
    proposed = [
        f"{p['action']}: {_label(report, p['memory_id'])}" for p in report.get("proposed", [])
    ]
    lines += _listed("likely duplicates, older forced into prune", duplicates)
    lines += _listed("proposed for review", proposed)
    lines += _listed("archived (decayed)", [_label(report, i) for i in report.get("archived", [])])
    lines += _listed("faded", [_label(report, i) for i in report.get("faded", [])])
    if report.get("held_back"):
        lines.append(f"held back by the collapse guard (proposed instead): {report['held_back']}")
    consolidation = report.get("consolidation")
    if consolidation:
        done = ", ".join(f"{k} {v}" for k, v in consolidation.items() if not isinstance(v, list))
        lines.append(f"consolidation: {done}")
    return "\n".join(lines)
