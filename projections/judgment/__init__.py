"""Judgment: asking a judge for the forgetting pass's verdicts. Side effects (HTTP) live
here; what a verdict and the judged state are lives in :mod:`palimpsest.domain.verdicts` and
:mod:`palimpsest.domain.judge_state`.

Modules:

- :mod:`palimpsest.projections.judgment._answers`: Reading a judge's answer: each item's line,
  its verdict, and the distribution at its letter.
- :mod:`palimpsest.projections.judgment.importance`: Importance from a chat model: how much a
  memory matters, asked of an OpenAI-compatible model.
- :mod:`palimpsest.projections.judgment.judge`: The judge interface: items in, one verdict (or
  one item's failure) out per item.
- :mod:`palimpsest.projections.judgment._openai_compatible`: A judge behind any
  OpenAI-compatible ``/v1/chat/completions`` endpoint.
- :mod:`palimpsest.projections.judgment._prompt`: The chat request a judge sends for one batch:
  instructions, the state, the answer format.
- :mod:`palimpsest.projections.judgment._recorded`: Recorded judge: real responses of a real
  model server, replayed over loopback HTTP.
- :mod:`palimpsest.projections.judgment.settings`: Settings of the judge: which kind, where it
  is, and how to talk to it.
- :mod:`palimpsest.projections.judgment.summariser`: Consolidation's summariser: merged text
  for a group, and reflections over memories.
"""

from __future__ import annotations

__all__ = [
    "importance",
    "judge",
    "settings",
    "summariser",
]
