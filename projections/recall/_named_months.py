"""The months a query names: "in June", "on 1 February, 2023", "May 2023", "2023-05-08".

Hybrid recall favours the memories whose time falls in a month the query names
(:data:`palimpsest.projections.recall._fusion.TIME_BONUS`): "When did Melanie go
camping in June?" asks about what was captured in June. A month with a year names that
month of that year; a month alone names it in any year. Only calendar names count:
relative phrases ("last week", "yesterday") depend on when the question is asked, which
a memory service answering for past conversations cannot know.

"May" and "March" are also a verb and a modal ("May I ...", "march on"): written in
lower case they name a month only beside a day or a year ("may 2023", "march 3"), and
"May" opening the query ("May I see ...") only so too. Three-letter abbreviations
("Feb", "Sept") name a month only beside a day or a year, for the same reason ("mar",
"jan" and "dec" are words or names too).

Pure: text in, months out; no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

__all__ = ["NamedMonth", "named_months"]

_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_ABBREVIATIONS = {
    **{name[:3]: number for number, name in enumerate(_MONTHS, start=1)},
    "sept": 9,
}
_NUMBER = {name: number for number, name in enumerate(_MONTHS, start=1)}
_AMBIGUOUS = frozenset({"may", "march"})

_YEAR = r"(?:1[89]|2[01])\d\d"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_NAME = r"[A-Za-z]+\.?"
_WRITTEN = re.compile(
    rf"(?<![\w-])(?:(?P<day_before>{_DAY})(?:\s+of)?\s+)?"
    rf"(?P<name>{_NAME})"
    rf"(?:\s+(?P<day_after>{_DAY})\b)?"
    rf"(?:,?\s+(?:of\s+)?(?P<year>{_YEAR})\b)?"
)
_ISO = re.compile(rf"(?<![\w-])(?P<year>{_YEAR})-(?P<month>0[1-9]|1[0-2])(?:-\d\d)?(?![\w-])")


@dataclass(frozen=True)
class NamedMonth:
    """A month a query names: ``month`` (1-12) of ``year``, or of any year when None."""

    month: int
    year: int | None = None

    def holds(self, at: datetime) -> bool:
        """Whether ``at`` falls in this month (read in ``at``'s own time zone: memory
        times are stored in UTC)."""
        return at.month == self.month and (self.year is None or at.year == self.year)


def named_months(text: str) -> tuple[NamedMonth, ...]:
    """Return the months ``text`` names, in the order it names them, each once."""
    found: list[NamedMonth] = []
    for match in _WRITTEN.finditer(text):
        month = _month(match, opening=match.start("name") == _first_word(text))
        if month is not None:
            year = match["year"]
            found.append(NamedMonth(month, int(year) if year else None))
    found += [NamedMonth(int(m["month"]), int(m["year"])) for m in _ISO.finditer(text)]
    return tuple(dict.fromkeys(found))


def _first_word(text: str) -> int:
    return len(text) - len(text.lstrip())


def _month(match: re.Match[str], *, opening: bool) -> int | None:
    """Return the month ``match``'s name names, or None (not a month, or a word that
    names one only beside a day or a year and stands without)."""
    written = match["name"]
    name = written.rstrip(".").lower()
    dated = any(match[part] for part in ("day_before", "day_after", "year"))
    if name in _NUMBER:
        if name in _AMBIGUOUS and not dated and (written[0].islower() or opening):
            return None
        return _NUMBER[name]
    if name in _ABBREVIATIONS and dated:
        return _ABBREVIATIONS[name]
    return None
